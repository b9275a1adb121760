"""How many bytes one conversation would take in a slimmer schema: a sizing study for issue 23.

    python -m benchmarks.bench_footprint_design --url URL [--events N] [--output PATH]

Not viewstore's schema. ``bench_footprint`` measures the store as it is (2.2x to 2.9x a plain
table). This study builds the same two streams (``history``, ``condensed``) into a real store,
then copies what that store holds into the tables of a redesign and measures their pages the
same way (``bench_footprint.table_bytes``). It answers one question before anyone rewrites the
projector's storage: would the redesign reach the 1.3x target, and which part of it counts most?

The redesign, every lever at once (each table's bytes are reported apart):

- ``d_conversations``: each conversation gets an integer number; every other table names it by
  that number instead of its 32-hex id.
- ``d_events``, the log: one integer key, ``number << 32 | seq`` (on SQLite the table's rowid, so
  the row is its own primary-key index); the payload; the chain hash as 32 raw bytes; the
  record time as integer microseconds; the feed position (indexed). The event id, kind, source,
  timestamp and parent id are read from the payload (``json_extract``), not stored again. The
  event id's uniqueness goes through an index of its first 8 SHA-256 bytes with the number
  (a hit is confirmed against the payload's id).
- ``d_view_spans``: the view's membership as runs of consecutive seqs that entered the view when
  appended and left it at the same condensation (or are in it still): ``(number, first_seq,
  last_seq, left_seq)``. A row that breaks that pattern (a summary, a fork's copy) would keep a
  row of its own (``d_view_rows``, the study copies the summaries there).
- ``d_forgotten_spans``: a condensation's forgotten ids as runs of consecutive seqs with the same
  ``was_in_view``; ids the log does not hold keep a row each (``d_forgotten_ids``).
- ``d_indices``: the manipulation indices as now, by number.

``--compact`` adds compaction (docs/retention.md) at age 0 of every event every view forgot,
once the plain table holds the original payloads:

- ``kept``: what the store does now, in the redesign: the log keeps the compacted payload
  (structure, ids, numbers, ``[compacted]``); ``d_compactions`` keeps, per event, the text
  digest of the original and the leaf digest of each string removed, as raw bytes (the rest
  of a record, the hashes around the event, the log already holds).
- ``envelope``: a design not built: the log keeps only ``{"id", "kind"}`` and a reader would
  stand a placeholder in for the rest; ``d_compactions`` keeps the original's text digest and
  content root, 64 bytes, which carry the chain across the event but cannot show its envelope
  unchanged (a keyed record could vouch for it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, text

from benchmarks.bench_footprint import BATCH, TARGET, added, plain_events, shapes, table_bytes
from benchmarks.bench_footprint import _meta as plain_meta
from benchmarks.bench_store import save
from viewstore import EventStore

_SQLITE = """
CREATE TABLE d_conversations (num INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE);
CREATE TABLE d_events (
    key INTEGER PRIMARY KEY, id_hash INTEGER NOT NULL, payload TEXT NOT NULL,
    hash BLOB NOT NULL, recorded_at INTEGER NOT NULL, position INTEGER NOT NULL);
CREATE INDEX d_events_id ON d_events ((key >> 32), id_hash);
CREATE UNIQUE INDEX d_events_position ON d_events (position);
CREATE TABLE d_view_spans (
    num INTEGER NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    left_seq INTEGER, PRIMARY KEY (num, first_seq)) WITHOUT ROWID;
CREATE INDEX d_view_spans_current ON d_view_spans (num, first_seq) WHERE left_seq IS NULL;
CREATE TABLE d_view_rows (
    num INTEGER NOT NULL, order_key TEXT NOT NULL, seq INTEGER NOT NULL,
    entered_seq INTEGER NOT NULL, left_seq INTEGER, payload TEXT,
    PRIMARY KEY (num, order_key)) WITHOUT ROWID;
CREATE TABLE d_forgotten_spans (
    num INTEGER NOT NULL, seq INTEGER NOT NULL, first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL, was_in_view INTEGER NOT NULL,
    PRIMARY KEY (num, seq, first_seq)) WITHOUT ROWID;
CREATE INDEX d_forgotten_spans_seq ON d_forgotten_spans (num, first_seq);
CREATE TABLE d_forgotten_ids (
    num INTEGER NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL,
    was_in_view INTEGER NOT NULL, PRIMARY KEY (num, seq, event_id)) WITHOUT ROWID;
CREATE TABLE d_indices (
    num INTEGER NOT NULL, position INTEGER NOT NULL, from_seq INTEGER NOT NULL,
    to_seq INTEGER, PRIMARY KEY (num, position, from_seq)) WITHOUT ROWID;
CREATE INDEX d_indices_current ON d_indices (num, position) WHERE to_seq IS NULL;
CREATE TABLE d_compactions (key INTEGER PRIMARY KEY, digests BLOB NOT NULL);
"""

_POSTGRES = """
CREATE TABLE d_conversations (num integer PRIMARY KEY, id text NOT NULL UNIQUE);
CREATE TABLE d_events (
    key bigint PRIMARY KEY, id_hash bigint NOT NULL, payload text NOT NULL,
    hash bytea NOT NULL, recorded_at bigint NOT NULL, position bigint NOT NULL);
ALTER TABLE d_events ALTER COLUMN payload SET STORAGE MAIN;
CREATE INDEX d_events_id ON d_events ((key >> 32), id_hash);
CREATE UNIQUE INDEX d_events_position ON d_events (position);
CREATE TABLE d_view_spans (
    num integer NOT NULL, first_seq bigint NOT NULL, last_seq bigint NOT NULL,
    left_seq bigint, PRIMARY KEY (num, first_seq));
CREATE INDEX d_view_spans_current ON d_view_spans (num, first_seq) WHERE left_seq IS NULL;
CREATE TABLE d_view_rows (
    num integer NOT NULL, order_key text COLLATE "C" NOT NULL, seq bigint NOT NULL,
    entered_seq bigint NOT NULL, left_seq bigint, payload text,
    PRIMARY KEY (num, order_key));
CREATE TABLE d_forgotten_spans (
    num integer NOT NULL, seq bigint NOT NULL, first_seq bigint NOT NULL,
    last_seq bigint NOT NULL, was_in_view boolean NOT NULL,
    PRIMARY KEY (num, seq, first_seq));
CREATE INDEX d_forgotten_spans_seq ON d_forgotten_spans (num, first_seq);
CREATE TABLE d_forgotten_ids (
    num integer NOT NULL, seq bigint NOT NULL, event_id text NOT NULL,
    was_in_view boolean NOT NULL, PRIMARY KEY (num, seq, event_id));
CREATE TABLE d_indices (
    num integer NOT NULL, position integer NOT NULL, from_seq bigint NOT NULL,
    to_seq bigint, PRIMARY KEY (num, position, from_seq));
CREATE INDEX d_indices_current ON d_indices (num, position) WHERE to_seq IS NULL;
CREATE TABLE d_compactions (key bigint PRIMARY KEY, digests bytea NOT NULL);
"""


def _id_hash(event_id: str) -> int:
    signed: int = struct.unpack(">q", hashlib.sha256(event_id.encode()).digest()[:8])[0]
    return signed


def _micros(value: Any) -> int:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return int(moment.timestamp() * 1_000_000)


def spans(rows: Sequence[tuple[int, Any]]) -> Iterator[tuple[int, int, Any]]:
    """Runs of consecutive seqs with the same second field, from rows sorted by seq."""
    run: list[Any] = []  # first seq, last seq, the field
    for seq, value in rows:
        if run and seq == run[1] + 1 and value == run[2]:
            run[1] = seq
            continue
        if run:
            yield run[0], run[1], run[2]
        run = [seq, seq, value]
    if run:
        yield run[0], run[1], run[2]


def _insert(conn: Connection, sql: str, rows: list[dict[str, Any]]) -> None:
    for start in range(0, len(rows), BATCH):
        if rows[start : start + BATCH]:
            conn.execute(text(sql), rows[start : start + BATCH])


def copy_conversation(conn: Connection, key: str, num: int) -> dict[str, int]:
    """The conversation's rows in the redesign's tables; how many rows each got."""
    read = {"c": key}
    conn.execute(text("INSERT INTO d_conversations VALUES (:n, :c)"), {"n": num, "c": key})
    log = conn.execute(
        text(
            "SELECT seq, event_id, payload, hash, recorded_at, position FROM events "
            "WHERE conversation_id = :c ORDER BY seq"
        ),
        read,
    ).all()
    seq_of = {row.event_id: row.seq for row in log}
    _insert(
        conn,
        "INSERT INTO d_events VALUES (:k, :i, :p, :h, :r, :pos)",
        [
            {
                "k": num << 32 | row.seq,
                "i": _id_hash(row.event_id),
                "p": row.payload,
                "h": bytes.fromhex(row.hash),
                "r": _micros(row.recorded_at),
                "pos": row.position,
            }
            for row in log
        ],
    )
    view = conn.execute(
        text(
            "SELECT seq, entered_seq, left_seq, is_summary, order_key, payload FROM view_entries "
            "WHERE conversation_id = :c ORDER BY order_key"
        ),
        read,
    ).all()
    plain = [row for row in view if not row.is_summary and row.entered_seq == row.seq]
    odd = [row for row in view if row.is_summary or row.entered_seq != row.seq]
    view_spans = list(spans(sorted((row.seq, row.left_seq) for row in plain)))
    _insert(
        conn,
        "INSERT INTO d_view_spans VALUES (:n, :a, :b, :l)",
        [{"n": num, "a": a, "b": b, "l": left} for a, b, left in view_spans],
    )
    _insert(
        conn,
        "INSERT INTO d_view_rows VALUES (:n, :o, :s, :e, :l, :p)",
        [
            {"n": num, "o": r.order_key, "s": r.seq, "e": r.entered_seq, "l": r.left_seq}
            | {"p": r.payload}
            for r in odd
        ],
    )
    forgotten = conn.execute(
        text(
            "SELECT seq, event_id, was_in_view FROM condensation_forgotten "
            "WHERE conversation_id = :c ORDER BY seq"
        ),
        read,
    ).all()
    by_condensation: dict[int, list[tuple[int, bool]]] = {}
    strays = []
    for row in forgotten:
        if row.event_id in seq_of:
            by_condensation.setdefault(row.seq, []).append(
                (seq_of[row.event_id], bool(row.was_in_view))
            )
        else:
            strays.append(row)
    forgotten_spans = [
        {"n": num, "s": seq, "a": a, "b": b, "w": flag}
        for seq, members in by_condensation.items()
        for a, b, flag in spans(sorted(members))
    ]
    _insert(conn, "INSERT INTO d_forgotten_spans VALUES (:n, :s, :a, :b, :w)", forgotten_spans)
    _insert(
        conn,
        "INSERT INTO d_forgotten_ids VALUES (:n, :s, :e, :w)",
        [{"n": num, "s": r.seq, "e": r.event_id, "w": bool(r.was_in_view)} for r in strays],
    )
    indices = conn.execute(
        text(
            "SELECT position, from_seq, to_seq FROM manipulation_indices WHERE conversation_id = :c"
        ),
        read,
    ).all()
    _insert(
        conn,
        "INSERT INTO d_indices VALUES (:n, :p, :f, :t)",
        [{"n": num, "p": r.position, "f": r.from_seq, "t": r.to_seq} for r in indices],
    )
    return {
        "d_events": len(log),
        "d_view_spans": len(view_spans),
        "d_view_rows": len(odd),
        "d_forgotten_spans": len(forgotten_spans),
        "d_forgotten_ids": len(strays),
        "d_indices": len(indices),
        "view_entries (now)": len(view),
        "condensation_forgotten (now)": len(forgotten),
    }


def create_design(engine: Engine) -> None:
    script = _SQLITE if engine.dialect.name == "sqlite" else _POSTGRES
    with engine.begin() as conn:
        for statement in script.split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)


def _compact(store: EventStore, key: str, num: int, how: str) -> int:
    """Compact ``key`` in the store, then put what ``how`` keeps into the redesign's tables;
    the number of events compacted."""
    with store.engine.connect() as conn:
        originals = {
            int(row.seq): row.payload
            for row in conn.execute(
                text("SELECT seq, payload FROM events WHERE conversation_id = :c"), {"c": key}
            )
        }
    store.compact(key, older_than=timedelta(0), min_freed=-(10**6), pace=0)
    records = [r for r in store.redactions(key) if r.compacted]
    with store.engine.begin() as conn:
        _keep(conn, store, key, num, how=how, records=records, originals=originals)
    return len(records)


def _keep(
    conn: Connection,
    store: EventStore,
    key: str,
    num: int,
    *,
    how: str,
    records: list[Any],
    originals: dict[int, str],
) -> None:
    from viewstore.domain import leaves  # noqa: PLC0415 - the study's own
    from viewstore.domain.chain import content_root, text_digest  # noqa: PLC0415

    for record in records:
        (event,) = store.events(key, after=record.seq - 1, limit=1)
        original = originals[record.seq]
        if how == "kept":
            digests = leaves.decode(record.leaf_digests or "{}")
            payload = event.payload_json
            kept = bytes.fromhex(text_digest(original)) + b"".join(
                bytes.fromhex(d) for d in digests.values()
            )
        else:
            payload = json.dumps({"id": event.event_id, "kind": event.kind})
            kept = bytes.fromhex(text_digest(original) + content_root(original))
        conn.execute(
            text("UPDATE d_events SET payload = :p WHERE key = :k"),
            {"p": payload, "k": num << 32 | record.seq},
        )
        conn.execute(
            text("INSERT INTO d_compactions VALUES (:k, :d)"),
            {"k": num << 32 | record.seq, "d": kept},
        )


def measure_shape(
    store: EventStore, events: list[dict[str, Any]], num: int, compact: str = "none"
) -> dict[str, Any]:
    engine = store.engine
    postgres = engine.dialect.name == "postgresql"
    key = uuid.uuid4().hex
    before = table_bytes(engine)
    for start in range(0, len(events), BATCH):
        store.append(key, events[start : start + BATCH])
    stored = table_bytes(engine)
    with engine.begin() as conn:
        rows = copy_conversation(conn, key, num)
        payloads = conn.execute(
            text("SELECT seq, payload FROM events WHERE conversation_id = :c ORDER BY seq"),
            {"c": key},
        ).all()
        _insert(
            conn,
            f"INSERT INTO {plain_events.name} VALUES (:c, :s, :p)",
            [{"c": key, "s": row.seq, "p": row.payload} for row in payloads],
        )
    compacted = 0 if compact == "none" else _compact(store, key, num, compact)
    if not postgres and compact != "none":
        # SQLite keeps what an update freed inside its pages until a VACUUM: what a
        # compacting store would run to give it back.
        from benchmarks.bench_compaction import _vacuum  # noqa: PLC0415 - this case only

        _vacuum(engine)
    if postgres:
        # VACUUM FULL of the redesign's tables when compaction rewrote their rows: what a
        # compacting store would give back.
        if compact != "none":
            with engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM FULL d_events"
                )  # a redesign's store would be vacuumed as the store is: count live pages
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")
    after = table_bytes(engine)
    now = added(before, stored)
    copied = added(stored, after)
    plain = copied.pop(plain_events.name, 0)
    design = {name: size for name, size in copied.items() if name.startswith("d_")}
    count = len(events)
    return {
        "events": count,
        "plain_bytes_per_event": plain / count,
        "now_bytes_per_event": sum(now.values()) / count,
        "now_ratio": sum(now.values()) / plain,
        "design_bytes_per_event": sum(design.values()) / count,
        "design_ratio": sum(design.values()) / plain,
        "design_tables": {name: size / count for name, size in sorted(design.items())},
        "rows": rows,
        "compact": compact,
        "events_compacted": compacted,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    store = EventStore(args.url)
    store.create_schema()
    plain_meta.create_all(store.engine)
    create_design(store.engine)
    results: dict[str, Any] = {"backend": store.engine.dialect.name, "target": TARGET}
    for num, (name, events) in enumerate(shapes(args.events).items(), start=1):
        results[name] = measure_shape(store, events, num, args.compact)
    store.close()
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"a slimmer schema, sized ({results['backend']}; target {results['target']}x; "
        f"compaction: {results['history']['compact']})"
    ]
    for name in ("history", "condensed"):
        r = results[name]
        lines.append(
            f"  {name:<10} plain {r['plain_bytes_per_event']:.0f} B/event; now "
            f"{r['now_bytes_per_event']:.0f} = {r['now_ratio']:.2f}x; redesign "
            f"{r['design_bytes_per_event']:.0f} = {r['design_ratio']:.2f}x"
        )
        lines.append(
            "    redesign per table (B/event): "
            + ", ".join(f"{t} {b:.0f}" for t, b in r["design_tables"].items())
        )
        lines.append("    rows: " + ", ".join(f"{t} {n}" for t, n in r["rows"].items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="an empty database")
    parser.add_argument("--events", type=int, default=6000)
    parser.add_argument("--compact", choices=("none", "kept", "envelope"), default="none")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    print(report(results))
    save(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
