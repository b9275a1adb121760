"""What one conversation adds to the database, next to a plain table of its events.

    python -m benchmarks.bench_footprint --url URL [--events N] [--output PATH]

Two shapes of a realistic OpenHands stream (``bench_view.StreamGenerator`` with its texts cut so
a payload is about 600 bytes, as the SDK's streams measure): ``history`` (no condensation: the
view is the whole history) and ``condensed`` (a condenser keeps the view near 120 events, so
nearly every event has left it). Each is appended to a fresh conversation in batches of 500, and
the same payloads are inserted into the plain table ``bench_plain_events (conversation_id, seq,
payload)`` with its primary key, the floor any store of the events pays.

Bytes are the pages the database holds: on SQLite the ``dbstat`` table's page sizes after a
checkpoint; on PostgreSQL the main fork of every table, its TOAST table and every index (free
space maps and visibility maps left out). Both are measured before and after, per table, so the
result shows where the bytes go. The view read of each shape is timed against a raw ``SELECT``
of the same payloads from the plain table, and the as-of read (half way) next to it.

It prints a table and writes ``--output`` (``python -m benchmarks`` writes
``benchmarks/results/footprint-<backend>.json``).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    insert,
    text,
)

from benchmarks.bench_store import median, save
from benchmarks.bench_view import generate
from viewstore import EventStore

TARGET = 1.3
#: Texts at a fifth of bench_view's: payloads of about 600 bytes, as measured on SDK streams.
TEXT_SCALE = 0.2
BATCH = 500

_meta = MetaData()
plain_events = Table(
    "bench_plain_events",
    _meta,
    Column("conversation_id", String(255), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("payload", Text, nullable=False),
    PrimaryKeyConstraint("conversation_id", "seq"),
)

_SQLITE_SIZES = (
    "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d "
    "LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY 1"
)
# Each table's main fork, its TOAST table and TOAST index, and its indexes (by the table they
# index), in the store's schema.
_POSTGRES_SIZES = """
SELECT t.relname, sum(pg_relation_size(r.oid, 'main'))
FROM pg_class t
JOIN pg_namespace n ON n.oid = t.relnamespace AND n.nspname = current_schema()
JOIN LATERAL (
    SELECT t.oid
    UNION ALL SELECT t.reltoastrelid WHERE t.reltoastrelid <> 0
    UNION ALL SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = t.oid
    UNION ALL SELECT i.indexrelid FROM pg_index i WHERE i.indrelid = t.reltoastrelid
) r ON true
WHERE t.relkind IN ('r', 'p')
GROUP BY t.relname
"""


def table_bytes(engine: Engine) -> dict[str, int]:
    """Bytes held now, per table (its indexes and TOAST included)."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            rows = conn.exec_driver_sql(_SQLITE_SIZES).all()
        else:
            rows = conn.execute(text(_POSTGRES_SIZES)).all()
    return {str(name): int(size) for name, size in rows}


def added(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        name: after[name] - before.get(name, 0)
        for name in sorted(after)
        if after[name] != before.get(name, 0)
    }


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_shape(store: EventStore, events: list[dict[str, Any]], repeat: int) -> dict[str, Any]:
    engine = store.engine
    # 32 hex digits as an OpenHands id, but rising with time: the conversation's keys sort after
    # every key already stored, so its index entries fill pages as a conversation alone in a
    # store does. A key landing among others (a random id in a busy store) splits PostgreSQL's
    # index pages in halves, for its plain table as for the store: docs/schema.md.
    key = f"{time.time_ns():032x}"
    before = table_bytes(engine)
    for start in range(0, len(events), BATCH):
        store.append(key, events[start : start + BATCH])
    middle = table_bytes(engine)
    payloads = [row.payload_json for row in store.events(key)]
    with engine.begin() as conn:
        for start in range(0, len(payloads), BATCH):
            conn.execute(
                insert(plain_events),
                [
                    {"conversation_id": key, "seq": seq, "payload": payload}
                    for seq, payload in enumerate(payloads[start : start + BATCH], start + 1)
                ],
            )
    after = table_bytes(engine)
    store_tables = added(before, middle)
    plain = after.get(plain_events.name, 0) - middle.get(plain_events.name, 0)
    total = sum(store_tables.values())
    view = store.view(key)
    seqs = [row.seq for row in store.events(key)]
    view_seqs = _view_seqs(store, key, len(view.events))
    raw_query = text(
        "SELECT payload FROM bench_plain_events WHERE conversation_id = :c "
        "AND seq >= :a ORDER BY seq LIMIT :n"
    ).bindparams(c=key, a=view_seqs, n=len(view.events))

    def raw() -> None:
        with engine.connect() as conn:
            conn.execute(raw_query).all()

    half = seqs[len(seqs) // 2]
    reads, raws, as_ofs = [], [], []
    for _ in range(repeat):
        reads.append(_timed(lambda: store.view(key)))
        raws.append(_timed(raw))
        as_ofs.append(_timed(lambda: store.view(key, as_of=half)))
    return {
        "events": len(events),
        "view_length": len(view.events),
        "payload_bytes": sum(len(p.encode()) for p in payloads),
        "store_bytes": total,
        "plain_bytes": plain,
        "ratio": total / plain,
        "target": f"<= {TARGET}",
        "met": total / plain <= TARGET,
        "bytes_per_event": total / len(events),
        "plain_bytes_per_event": plain / len(events),
        "tables": store_tables,
        "view_ms": median(reads) * 1e3,
        "raw_select_ms": median(raws) * 1e3,
        "read_ratio": median(reads) / median(raws),
        "as_of_seq": half,
        "as_of_ms": median(as_ofs) * 1e3,
    }


def _view_seqs(store: EventStore, key: str, length: int) -> int:
    """The seq from which the plain table's next ``length`` rows stand in for the view: the
    last ``length`` events (a condensed view is mostly its newest events)."""
    version = store.view(key).version
    return max(1, version - length + 1)


def shapes(count: int) -> dict[str, list[dict[str, Any]]]:
    """The two streams measured: ``history`` (no condensation) and ``condensed``."""
    return {
        "history": generate(count, 11, condense=False, text_scale=TEXT_SCALE),
        "condensed": generate(count, 12, condense=True, text_scale=TEXT_SCALE),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    store = EventStore(args.url)
    store.create_schema()
    _meta.create_all(store.engine)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "backend": store.engine.dialect.name,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    for name, events in shapes(args.events).items():
        print(f"... {name}", file=sys.stderr, flush=True)
        results[name] = measure_shape(store, events, args.repeat)
    store.close()
    return results


def report(results: dict[str, Any]) -> str:
    lines = [f"footprint of one conversation ({results['backend']})"]
    for name in ("history", "condensed"):
        r = results[name]
        lines.append(
            f"  {name:<10} {r['events']:>6} events, view {r['view_length']:>6}: "
            f"{r['bytes_per_event']:>7.0f} B/event vs plain {r['plain_bytes_per_event']:>5.0f}"
            f" = {r['ratio']:.2f}x (target {r['target']}, "
            f"{'met' if r['met'] else 'NOT met'})"
        )
        lines.append(
            "    per table (B/event): "
            + ", ".join(f"{t} {b / r['events']:.0f}" for t, b in r["tables"].items())
        )
        lines.append(
            f"    view read {r['view_ms']:.1f} ms vs raw SELECT {r['raw_select_ms']:.1f} ms "
            f"= {r['read_ratio']:.2f}x; as of seq {r['as_of_seq']}: {r['as_of_ms']:.1f} ms"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    print(report(results))
    save(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
