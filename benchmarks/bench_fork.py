"""Forking a long conversation, against re-appending its prefix to a new one.

    .venv/bin/python -m benchmarks.bench_fork --url URL [--events N] [--repeat R]

Builds one conversation of N generated events (condensed, as a long agent run is), then:
forks it at its last seq and at its middle seq, R times each, and re-appends the same prefix
to a new conversation (in batches of 500, as an import does) once; both measured in this run.
Reports the seconds of each, their ratio, and the rows each fork wrote against the rows of its
view. Then appends B single events to a fork and to a conversation that is not one (forks
take the ordinary append path, not the fast path: docs/lifecycle.md), alternating blocks.
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks.bench_store import (
    build,
    checkpoint,
    fresh_events,
    median,
    save,
    timed,
    timed_block,
)
from benchmarks.bench_view import generate
from viewstore import EventStore

_TABLES = ("events", "view_entries", "manipulation_indices", "conversations")


def _rows(store: EventStore) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {
            table: int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            for table in _TABLES
        }


def _fork_once(store: EventStore, source: str, at: int) -> tuple[float, dict[str, int]]:
    before = _rows(store)
    seconds = timed(lambda: (store.fork(source, at), checkpoint(store)))
    after = _rows(store)
    return seconds, {table: after[table] - before[table] for table in _TABLES}


def _appends(store: EventStore, blocks: int, block: int, seed: int) -> dict[str, float]:
    """Milliseconds per single-event append: to a fork, and to a plain conversation."""
    run = uuid.uuid4().hex[:6]
    plain, fork = f"plain-{run}", f"fork-{run}"
    build(store, plain, fresh_events(40, seed))
    store.fork(plain, store.version(plain), fork)
    streams = {plain: fresh_events(blocks * block, seed + 1)}
    streams[fork] = fresh_events(blocks * block, seed + 2)
    samples: dict[str, list[float]] = {plain: [], fork: []}
    checkpoint(store)
    for number in range(blocks):
        for key, stream in streams.items():
            chunk = stream[number * block : (number + 1) * block]

            def run_block(key: str = key, chunk: list[dict[str, Any]] = chunk) -> None:
                for event in chunk:
                    store.append(key, [event])

            samples[key].append(timed_block(store, run_block, block))
    return {
        "fork": round(median(samples[fork]) * 1000, 3),
        "plain": round(median(samples[plain]) * 1000, 3),
    }


def _fork_case(store: EventStore, stream: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    """One long conversation of ``stream``: forks of it at its last and middle seqs, against
    re-appending the prefix."""
    run = uuid.uuid4().hex[:6]
    source = f"long-{run}"
    build(store, source, stream)
    n = store.version(source)
    copy = f"copy-{run}"
    reappend_s = timed(lambda: (build(store, copy, stream), checkpoint(store)))
    case: dict[str, Any] = {"events": n, "reappend_s": round(reappend_s, 3)}
    for label, at in (("last", n), ("middle", n // 2)):
        view = store.view(source, as_of=at)
        samples, written = [], {}
        for _ in range(repeat):
            seconds, written = _fork_once(store, source, at)
            samples.append(seconds)
        fork_s = median(samples)
        case[label] = {
            "at_seq": at,
            "view_events": len(view.events),
            "view_indices": len(view.manipulation_indices),
            "fork_ms": round(fork_s * 1000, 3),
            "speedup_vs_reappend": round(reappend_s / fork_s, 1),
            "rows_written": written,
        }
    return case


def measure(url: str, events: int, repeat: int, seed: int, blocks: int) -> dict[str, Any]:
    store = EventStore(url)
    store.create_schema()
    result: dict[str, Any] = {"backend": store.engine.dialect.name}
    for name, condense in (("condensed", True), ("uncondensed", False)):
        # Ids are unique per conversation: the copy and every conversation here reuse them.
        stream = generate(events, seed, condense=condense)[:events]
        result[name] = _fork_case(store, stream, repeat)
    result["append_ms"] = _appends(store, blocks, BLOCK, seed + 7)
    result["append_fork_vs_plain"] = round(
        result["append_ms"]["fork"] / result["append_ms"]["plain"], 3
    )
    store.close()
    return result


BLOCK = 50


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.url, args.events, args.repeat, args.seed, args.blocks)
    for name in ("condensed", "uncondensed"):
        case = result[name]
        for label in ("last", "middle"):
            fork = case[label]
            print(
                f"{name}: fork of {case['events']} events at seq {fork['at_seq']} "
                f"(view {fork['view_events']}): {fork['fork_ms']} ms, "
                f"{fork['speedup_vs_reappend']}x faster than re-appending the prefix "
                f"({case['reappend_s']} s); rows written {fork['rows_written']}",
                flush=True,
            )
    print(
        f"single append: {result['append_ms']['fork']} ms to a fork, "
        f"{result['append_ms']['plain']} ms to a plain conversation "
        f"(fork/plain {result['append_fork_vs_plain']})",
        flush=True,
    )
    save(args.output, result)
    return result


if __name__ == "__main__":
    main()
