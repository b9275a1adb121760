"""Compaction (docs/retention.md): the bytes it frees, how fast it runs, and what it costs a
writer running beside it.

    python -m benchmarks.bench_compaction --url URL [--events N] [--conversations K]
        [--output PATH]

**Bytes.** Three shapes of a realistic OpenHands stream (``bench_view.StreamGenerator``):
``history`` (no condensation) and ``condensed`` with payloads of about 600 bytes, as
``bench_footprint`` measures them, and ``condensed-large``, the same with the generator's full
texts (tool outputs of a few kB, where agent stores grow). Each goes into a store of its own
(a file on SQLite, a schema on PostgreSQL) beside the plain table ``bench_plain_events
(conversation_id, seq, payload)`` of the same payloads; both are measured after a ``VACUUM``
(``VACUUM FULL`` on PostgreSQL, which gives back what an update left behind), then the store
again after ``compact(older_than=0)`` and another vacuum.

**Rate and interference.** ``--conversations`` condensed conversations of ``--events`` events
are stored; a writer appends one event at a time to a conversation of its own, alone, then
while another process compacts the whole store. The result gives the compaction's events per
second and the writer's latency beside it (median, 95th and 99th percentile, worst) against
alone (measured before the sweeper starts and after it ends). The sweeper runs at ``--pace``
(``store.compact(pace=...)``: it rests that many times as long as each batch worked).
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, text

from benchmarks.bench_footprint import TEXT_SCALE, _meta, plain_events, table_bytes
from benchmarks.bench_store import median, save
from benchmarks.bench_view import generate
from viewstore import EventStore

BATCH = 500
#: The goal: a writer's latency beside a compaction against alone.
INTERFERENCE_TARGET = 1.2
#: The goal for the condensed shape after compaction at age 0, against the plain table.
BYTES_TARGET = 0.5


def _shapes(count: int) -> dict[str, list[dict[str, Any]]]:
    return {
        "history": generate(count, 11, condense=False, text_scale=TEXT_SCALE),
        "condensed": generate(count, 12, condense=True, text_scale=TEXT_SCALE),
        "condensed-large": generate(count, 12, condense=True, text_scale=1.0),
    }


def _vacuum(engine: Engine) -> None:
    """Give back the space the store's tables no longer use: SQLite's ``VACUUM``, PostgreSQL's
    ``VACUUM FULL`` of the tables of the store's schema. Outside a transaction, on a
    connection of its own that is then thrown away."""
    with engine.connect() as conn:
        tables = (
            []
            if engine.dialect.name == "sqlite"
            else list(
                conn.execute(
                    text(
                        "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables "
                        "WHERE schemaname = current_schema()"
                    )
                ).scalars()
            )
        )
    raw = engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        if engine.dialect.name == "sqlite":
            driver.isolation_level = None
            driver.execute("VACUUM")
        else:
            driver.autocommit = True
            driver.execute("VACUUM FULL " + ", ".join(tables))
    finally:
        raw.invalidate()


def _store_for(url: str, name: str) -> tuple[EventStore, Any]:
    """A fresh store: a new file beside ``url``'s (SQLite) or a new schema (PostgreSQL), and
    what drops it."""
    if url.startswith("sqlite"):
        path = Path(url.split("///", 1)[1]).with_name(f"compaction-{name}.db")
        for stale in path.parent.glob(path.name + "*"):
            stale.unlink()
        store = EventStore(f"sqlite:///{path}")
        return store, path.unlink
    schema = f"bench_compaction_{name.replace('-', '_')}"
    setup = EventStore(url)
    with setup.engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    setup.close()
    store = EventStore(url, schema=schema)

    def drop() -> None:
        again = EventStore(url)
        with again.engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        again.close()

    return store, drop


def measure_bytes(url: str, name: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    store, drop = _store_for(url, name)
    try:
        store.create_schema()
        _meta.create_all(store.engine)
        key = uuid.uuid4().hex
        for start in range(0, len(events), BATCH):
            store.append(key, events[start : start + BATCH])
        payloads = [row.payload_json for row in store.events(key)]
        with store.engine.begin() as conn:
            conn.execute(
                insert(plain_events),
                [
                    {"conversation_id": key, "seq": seq, "payload": payload}
                    for seq, payload in enumerate(payloads, 1)
                ],
            )
        _vacuum(store.engine)
        before = table_bytes(store.engine)
        plain = before.pop(plain_events.name)
        started = time.perf_counter()
        report = store.compact(key, older_than=timedelta(0))
        elapsed = time.perf_counter() - started
        assert store.verify(key).ok
        _vacuum(store.engine)
        after = table_bytes(store.engine)
        after.pop(plain_events.name)
        view = store.view(key)
    finally:
        store.close()
        drop()
    stored, compacted = sum(before.values()), sum(after.values())
    return {
        "events": len(events),
        "view_length": len(view.events),
        "payload_bytes": sum(len(p.encode()) for p in payloads),
        "plain_bytes": plain,
        "store_bytes": stored,
        "compacted_bytes": compacted,
        "ratio_before": stored / plain,
        "ratio_after": compacted / plain,
        "events_compacted": report.events,
        "left_small": report.small,
        "bytes_freed_estimate": report.bytes_freed,
        "compact_seconds": elapsed,
        "tables_before": before,
        "tables_after": after,
    }


def _message(i: int) -> dict[str, Any]:
    return {
        "kind": "MessageEvent",
        "id": f"w{i}",
        "source": "user",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": f"step {i}"}]},
    }


def _writer_latencies(store: EventStore, key: str, first: int, count: int) -> list[float]:
    found = []
    for i in range(first, first + count):
        started = time.perf_counter()
        store.append(key, [_message(i)])
        found.append(time.perf_counter() - started)
    return found


def _compact_all(url: str, schema: str | None, pace: float, started: Any, done: Any) -> None:
    """The sweeper's process: it says when it starts, and puts what it compacted and how long
    it took."""
    with EventStore(url, schema=schema) as store:
        started.set()
        began = time.perf_counter()
        report = store.compact(older_than=timedelta(0), pace=pace)
        done.put((report.events, time.perf_counter() - began))


def _quantile(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(len(samples) * q))]


def _latencies(samples: list[float], name: str) -> dict[str, float]:
    return {
        f"writer_{name}_ms": median(samples) * 1e3,
        f"writer_{name}_p95_ms": _quantile(samples, 0.95) * 1e3,
        f"writer_{name}_p99_ms": _quantile(samples, 0.99) * 1e3,
        f"writer_{name}_max_ms": max(samples) * 1e3,
        f"writer_{name}_per_second": len(samples) / sum(samples),
    }


def measure_interference(
    url: str, conversations: int, count: int, writes: int, pace: float
) -> dict[str, Any]:
    store, drop = _store_for(url, "rate")
    schema = None if url.startswith("sqlite") else "bench_compaction_rate"
    target = str(store.engine.url.render_as_string(hide_password=False))
    try:
        store.create_schema()
        events = generate(count, 13, condense=True, text_scale=1.0)
        for c in range(conversations):
            for start in range(0, len(events), BATCH):
                store.append(f"c{c:05d}", events[start : start + BATCH])
        store.append("writer", [_message(0)])
        alone = _writer_latencies(store, "writer", 1, writes)
        context = multiprocessing.get_context("spawn")
        started, done = context.Event(), context.Queue()
        sweeper = context.Process(target=_compact_all, args=(target, schema, pace, started, done))
        sweeper.start()
        started.wait()
        # Appended one at a time while the sweeper runs, measured only while it does.
        beside: list[float] = []
        first = 1 + writes
        while sweeper.is_alive() and done.empty():
            beside += _writer_latencies(store, "writer", first, 10)
            first += 10
        compacted, elapsed = done.get()
        sweeper.join()
        # Alone again after it: the machine's own drift then weighs on both sides alike.
        alone += _writer_latencies(store, "writer", first, writes)
        assert store.verify().ok
    finally:
        store.close()
        drop()
    ratio = median(beside) / median(alone)
    return {
        "conversations": conversations,
        "pace": pace,
        "events": conversations * len(events),
        "events_compacted": compacted,
        "compact_seconds": elapsed,
        "events_per_second": compacted / elapsed,
        **_latencies(alone, "alone"),
        **_latencies(beside, "beside"),
        "writes_beside": len(beside),
        "latency_ratio": ratio,
        "target": f"<= {INTERFERENCE_TARGET}",
        "met": ratio <= INTERFERENCE_TARGET,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    probe = EventStore(args.url)
    backend = probe.engine.dialect.name
    probe.close()
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "backend": backend,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    for name, events in _shapes(args.events).items():
        print(f"... bytes, {name}", file=sys.stderr, flush=True)
        results[name] = measure_bytes(args.url, name, events)
    print("... rate and a writer beside it", file=sys.stderr, flush=True)
    results["interference"] = measure_interference(
        args.url, args.conversations, args.events, args.writes, args.pace
    )
    return results


def report(results: dict[str, Any]) -> str:
    lines = [f"compaction ({results['backend']})"]
    for name in ("history", "condensed", "condensed-large"):
        r = results[name]
        lines.append(
            f"  {name:<16} {r['events']:>6} events, view {r['view_length']:>5}: "
            f"{r['store_bytes'] / r['events']:>6.0f} -> {r['compacted_bytes'] / r['events']:>6.0f}"
            f" B/event vs plain {r['plain_bytes'] / r['events']:>5.0f} = "
            f"{r['ratio_before']:.2f}x -> {r['ratio_after']:.2f}x; "
            f"{r['events_compacted']} compacted, {r['left_small']} left small, "
            f"{r['compact_seconds']:.2f} s"
        )
    r = results["interference"]
    lines.append(
        f"  whole store of {r['events']} events in {r['conversations']} conversations, pace "
        f"{r['pace']}: "
        f"{r['events_compacted']} compacted in {r['compact_seconds']:.1f} s = "
        f"{r['events_per_second']:.0f} events/s"
    )
    lines.append(
        f"  a writer's one-event append, alone: median {r['writer_alone_ms']:.2f} ms, p95 "
        f"{r['writer_alone_p95_ms']:.2f}, p99 {r['writer_alone_p99_ms']:.2f}, max "
        f"{r['writer_alone_max_ms']:.1f}"
    )
    lines.append(
        f"  beside the sweeper ({r['writes_beside']} appends): median "
        f"{r['writer_beside_ms']:.2f} ms, p95 {r['writer_beside_p95_ms']:.2f}, p99 "
        f"{r['writer_beside_p99_ms']:.2f}, max {r['writer_beside_max_ms']:.1f}; median "
        f"{r['latency_ratio']:.2f}x alone (target {r['target']}, "
        f"{'met' if r['met'] else 'NOT met'})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--pace", type=float, default=2.0, help="the sweeper's pace")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    print(report(results))
    save(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
