"""Per-conversation reads on a PostgreSQL store never analyzed, against the same store analyzed
(issue 41's goal: each ratio <= 1.2).

    .venv/bin/python -m benchmarks.bench_statistics --url postgresql+psycopg://.../db

A fresh database, its tables with autovacuum off so that no statistics appear behind the
run's back; ``--partitions N`` hash-partitions it (a partitioned parent is never analyzed by
autovacuum). Other conversations, then a long condensed one (realistic events, a condenser
keeping its view near 100 events) and a fork of it half way. Each read is timed, best of
``--repeat``, without statistics; then ``ANALYZE`` and the same again: a view read now, as of
the middle, ``in_view`` of 20 ids, a resume, a page of the log, and the fork's view and resume.
Each ratio is unanalyzed over analyzed: a plan that depends on the estimates shows as a ratio
far above 1 (the view read was 6x before the statements were written for it:
docs/schema.md, "Plans that hold without statistics").
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks.bench_store import build, save, timed
from benchmarks.bench_view import generate
from viewstore import EventStore

GOAL = 1.2


def no_autovacuum(store: EventStore) -> None:
    """Autovacuum off on every table of the store (a partition's too: a partitioned parent
    itself is never analyzed by autovacuum), so that no statistics appear on their own."""
    with store.engine.begin() as conn:
        names = conn.execute(
            text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            )
        ).scalars()
        for name in list(names):
            conn.execute(text(f'ALTER TABLE "{name}" SET (autovacuum_enabled = false)'))


def analyzed_tables(store: EventStore) -> list[str]:
    """The tables of the database that were ever analyzed, by hand or by autovacuum."""
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT relname FROM pg_stat_user_tables WHERE last_analyze IS NOT NULL "
                "OR last_autoanalyze IS NOT NULL"
            )
        ).scalars()
        return list(found)


def _reads(store: EventStore, key: str, fork: str, ids: list[str]) -> dict[str, Callable[[], Any]]:
    middle = store.version(key) // 2
    return {
        "view": lambda: store.view(key),
        "view_as_of": lambda: store.view(key, as_of=middle),
        "in_view": lambda: store.in_view(key, ids),
        "resume": lambda: store.resume_view(key, skip_state_updates=True),
        "events_page": lambda: store.events(key, after=middle, limit=100),
        "fork_view": lambda: store.view(fork),
        "fork_resume": lambda: store.resume_view(fork, skip_state_updates=True),
    }


def _best(reads: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Milliseconds, the best of ``repeat`` rounds, each round every read once (so a pause of
    the machine or of the collector falls on one round of each, not on one read)."""
    gc.collect()
    for read in reads.values():  # warm the caches alike for both rounds
        read()
    samples: dict[str, list[float]] = {name: [] for name in reads}
    for _ in range(repeat):
        for name, read in reads.items():
            samples[name].append(timed(read) * 1000)
    return {name: min(found) for name, found in samples.items()}


def measure(
    url: str, events: int, others: int, repeat: int, partitions: int | None
) -> dict[str, Any]:
    store = EventStore(url)
    store.create_schema(partitions=partitions)
    no_autovacuum(store)
    for i in range(others):
        build(store, f"other-{i}", generate(events // 4, 100 + i, condense=True))
    stream = generate(events, 7, condense=True)
    build(store, "long", stream)
    fork = store.fork("long", len(stream) // 2, "long-fork")
    ids = [str(event["id"]) for event in stream[:: max(1, len(stream) // 20)]][:20]
    if analyzed_tables(store):
        raise RuntimeError("the store was analyzed before the run: autovacuum is on")
    view_length = len(store.view("long").event_ids)
    reads = _reads(store, "long", fork, ids)
    without = _best(reads, repeat)
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    analyzed = _best(reads, repeat)
    store.close()
    return {
        "backend": "postgresql",
        "partitions": partitions,
        "events": len(stream),
        "view_length": view_length,
        "ms_unanalyzed": without,
        "ms_analyzed": analyzed,
        "ratio": {name: without[name] / analyzed[name] for name in without},
        "goal": GOAL,
    }


def report(r: dict[str, Any]) -> str:
    lines = [
        f"Reads of a {r['events']}-event condensed conversation (view {r['view_length']}) and a "
        "fork of it, never analyzed "
        f"against analyzed (goal: each ratio <= {r['goal']})"
        + (f", {r['partitions']} partitions" if r["partitions"] else "")
    ]
    for name, ratio in r["ratio"].items():
        lines.append(
            f"  {name}: {r['ms_unanalyzed'][name]:.2f} ms against {r['ms_analyzed'][name]:.2f} ms"
            f" = {ratio:.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="a fresh PostgreSQL database")
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--others", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--partitions", type=int, default=None)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    result = measure(args.url, args.events, args.others, args.repeat, args.partitions)
    print(report(result))
    if args.output is not None:
        save(args.output, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
