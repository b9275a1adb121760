"""Hash-partitioned tables against plain ones on one PostgreSQL server (goal: each ratio
<= 1.1).

    .venv/bin/python -m benchmarks.bench_partitions --plain-url URL --partitioned-url URL

Two fresh databases on the same server: one store migrated as usual, one created with
``create_schema(partitions=N)``. Measured in alternating blocks so both sides meet the same
server state: single-event appends (the fast path) and the ordinary path
(``fast_path=False``, every statement routed by conversation: how a sharded server runs),
a current view read and an as-of view read. Each figure is the median per operation;
each ratio is partitioned over plain.

The fast path calls the server-side function on plain tables and sends the single statement
on partitioned ones (``viewstore/store/distribution/server_append.py`` says why), so ``append_fast``
compares the best each layout does; ``append_statement`` sends the statement on both, which
isolates what the partitions themselves cost.
"""

from __future__ import annotations

import argparse
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.bench_store import build, fresh_events, median, save, timed
from viewstore import EventStore

MEASURES = ("append_fast", "append_statement", "append_ordinary", "view", "view_as_of")


def _appends(store: EventStore, key: str, events: list[dict[str, Any]]) -> float:
    return timed(lambda: [store.append(key, [event]) for event in events]) / len(events)


def _sides(plain_url: str, split_url: str, partitions: int) -> dict[str, EventStore]:
    plain, split = EventStore(plain_url), EventStore(split_url)
    plain.create_schema()
    split.create_schema(partitions=partitions)
    return {"plain": plain, "partitioned": split}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    stores = _sides(args.plain_url, args.partitioned_url, args.partitions)
    ordinary = {side: EventStore(store.engine, fast_path=False) for side, store in stores.items()}
    statement = {
        side: EventStore(store.engine, server_append=False) for side, store in stores.items()
    }
    costs: dict[str, dict[str, list[float]]] = {
        measure: {side: [] for side in stores} for measure in MEASURES
    }
    keys = {}
    for side, store in stores.items():  # other conversations, so partitions are not empty
        for i in range(args.conversations):
            build(store, f"{side}-fill-{i}", fresh_events(args.read_size // 4, i))
        keys[side] = f"{side}-read-{uuid.uuid4().hex[:6]}"
        build(store, keys[side], fresh_events(args.read_size, args.seed))
    for block in range(args.blocks):
        order = list(stores) if block % 2 else list(reversed(stores))
        for side in order:
            store, key = stores[side], f"{side}-append-{block}"
            events = fresh_events(args.block + 1, args.seed + block)
            store.append(key, [events[0]])
            costs["append_fast"][side].append(_appends(store, key, events[1:]))
            events = fresh_events(args.block + 1, args.seed + block + 7919)
            statement[side].append(f"{key}-statement", [events[0]])
            costs["append_statement"][side].append(
                _appends(statement[side], f"{key}-statement", events[1:])
            )
            slow_key = f"{key}-ordinary"
            costs["append_ordinary"][side].append(
                _appends(ordinary[side], slow_key, fresh_events(args.block, block))
            )
            costs["view"][side].append(timed(partial(store.view, keys[side])))
            costs["view_as_of"][side].append(
                timed(partial(store.view, keys[side], as_of=args.read_size // 2))
            )
    result: dict[str, Any] = {"partitions": args.partitions, "goal": "<= 1.1"}
    for name, sides in costs.items():
        plain, split = median(sides["plain"]), median(sides["partitioned"])
        result[name] = {
            "plain_ms": round(plain * 1e3, 3),
            "partitioned_ms": round(split * 1e3, 3),
            "ratio": round(split / plain, 3),
            "met": split / plain <= 1.1,
        }
    for store in stores.values():
        store.close()
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plain-url", required=True)
    parser.add_argument("--partitioned-url", required=True)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--conversations", type=int, default=16)
    parser.add_argument("--read-size", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    result = measure(args)
    print(f"partitioned ({args.partitions}) vs plain PostgreSQL, goal <= 1.1:", flush=True)
    for name in MEASURES:
        row = result[name]
        print(
            f"  {name:16s} plain {row['plain_ms']:8.3f} ms  partitioned "
            f"{row['partitioned_ms']:8.3f} ms  ratio {row['ratio']:.3f}"
            f"{'' if row['met'] else '  OVER'}",
            flush=True,
        )
    save(args.output, result)
    return result


if __name__ == "__main__":
    main()
