"""The server-side append function against the single statement it replaces, and against a
bare ``INSERT`` + ``COMMIT`` of the same payloads (PostgreSQL).

    .venv/bin/python -m benchmarks.bench_server_append --url URL

Alternating blocks of single-event appends, each side to its own conversation: the store
calling ``viewstore_append_rows`` (migration 0014), the store sending the equivalent statement
(``server_append=False``), and the raw insert of issue 6's target. Medians per append;
the ratios are throughputs (cost of the other over cost of the function).
"""

from __future__ import annotations

import argparse
import json
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from benchmarks.bench_store import _raw_meta, fresh_events, median, raw_events, save, timed
from viewstore import EventStore
from viewstore.store.database.engine import WRITE


def measure(url: str, blocks: int, block: int, seed: int) -> dict[str, Any]:
    function = EventStore(url, server_append=True)
    function.create_schema()
    _raw_meta.create_all(function.engine)
    statement = EventStore(function.engine, server_append=False)
    raw_engine = function.engine.execution_options(**WRITE)
    costs: dict[str, list[float]] = {"function": [], "statement": [], "raw": []}
    keys = {side: f"{side}-{uuid.uuid4().hex[:6]}" for side in ("function", "statement")}
    first = fresh_events(2, seed)
    for side, store in (("function", function), ("statement", statement)):
        store.append(keys[side], [first[0]])
        store.append(keys[side], [first[1]])  # the fast path from here on

    def appends(store: EventStore, key: str, events: list[dict[str, Any]]) -> None:
        for event in events:
            store.append(key, [event])

    def raw(events: list[dict[str, Any]]) -> None:
        for event in events:
            payload = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
            with raw_engine.begin() as conn:
                conn.execute(
                    insert(raw_events),
                    {"conversation_id": "raw", "event_id": event["id"], "payload": payload},
                )

    for number in range(blocks):
        events = fresh_events(block, seed + number + 1)
        sides = ["function", "statement", "raw"]
        for side in sides[number % 3 :] + sides[: number % 3]:  # rotate who goes first
            if side == "raw":
                run = partial(raw, events)
            else:
                store = function if side == "function" else statement
                run = partial(appends, store, keys[side], events)
            costs[side].append(timed(run) / block)
    function.close()
    fn, st, rw = (median(costs[side]) for side in ("function", "statement", "raw"))
    return {
        "function_ms": round(fn * 1e3, 3),
        "statement_ms": round(st * 1e3, 3),
        "raw_insert_commit_ms": round(rw * 1e3, 3),
        "function_vs_statement_speedup": round(st / fn, 3),
        "function_vs_raw_throughput": round(rw / fn, 3),
        "raw_target": ">= 0.85",
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.url, args.blocks, args.block, args.seed)
    print(
        f"server-side append: {result['function_ms']} ms, the single statement "
        f"{result['statement_ms']} ms ({result['function_vs_statement_speedup']}x), raw "
        f"INSERT+COMMIT {result['raw_insert_commit_ms']} ms (throughput vs raw "
        f"{result['function_vs_raw_throughput']}, target >= 0.85)",
        flush=True,
    )
    save(args.output, result)
    return result


if __name__ == "__main__":
    main()
