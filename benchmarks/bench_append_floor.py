"""Where a one-event SQLite append spends its time, and what a slimmer schema would save: a
study for issue 23's append target (>= 0.85x a raw INSERT + COMMIT).

    python -m benchmarks.bench_append_floor --url sqlite:///floor.db [--output PATH]

Five writers in interleaved blocks (each ending with a timed checkpoint, as ``bench_store``
times them), of the same condensation-free events, viewstore and the raw insert in one SQLite
file through one engine, each redesign in a file of its own (each conversation alone in its
log):

- **viewstore**: ``store.append(key, [event])``;
- **raw**: ``bench_store``'s floor, an ``INSERT`` + ``COMMIT`` of the payload into a bare table;
- **redesign**: the append of ``bench_footprint_design``'s schema with the catalogue's indexes
  (``r_conversations``): the same Python work as viewstore's fast path (the event parsed and
  checked, its chained hash, the projection: ``fast_path.plan``) and then, in one
  ``BEGIN IMMEDIATE`` on the driver, the compare-and-set of the conversation row, the log row
  keyed ``number << 32 | seq``, the view as a span of seqs (extended, or a new one), and the
  manipulation indices; and the same again with a conversation row that has no order index
  (``r_unordered``: a catalogue that lists by id only), to weigh the catalogue's share;
- **work only**: that Python work with no write at all (the floor of any schema).

For each, the WAL frames one append writes, by table or index (``wal_pages``). A frame costs
tens of microseconds (its write, then its share of the checkpoint that copies it back), so an
append's bytes matter only through the pages they fall in. Not viewstore's schema: nothing here
is used by the store (docs/schema.md, "What an append writes, page by page").
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, insert

from benchmarks.bench_footprint_design import _id_hash, _micros, create_design
from benchmarks.bench_store import (
    _raw_meta,
    build,
    checkpoint,
    fresh_events,
    median,
    raw_events,
    save,
    timed,
    timed_block,
)
from benchmarks.wal_pages import pages_per_call
from viewstore import EventStore
from viewstore.domain.projector import ProjectionState
from viewstore.store.append import fast_path
from viewstore.store.append.batch import parse_batch
from viewstore.store.append.tails import Tail
from viewstore.store.database.engine import WRITE

TARGET = 0.85
#: The writers whose pages are counted (the fourth, the work alone, writes none).
_WRITERS = ("viewstore", "raw", "redesign", "redesign_unordered")

# The redesign's tables are bench_footprint_design's; only its conversation row is new here:
# in r_conversations with the catalogue's order indexes, which every append moves (as
# viewstore's do), and in r_unordered without them (a catalogue listed by id only).
_CONVERSATIONS = """
CREATE TABLE {} (
    num INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, version INTEGER NOT NULL, view_length INTEGER NOT NULL,
    state TEXT NOT NULL, last_hash BLOB NOT NULL)
"""
_CATALOGUE = [
    _CONVERSATIONS.format("r_conversations"),
    _CONVERSATIONS.format("r_unordered"),
    "CREATE INDEX r_conversations_updated_at ON r_conversations (updated_at, id)",
    "CREATE INDEX r_conversations_version ON r_conversations (version, id)",
    "CREATE INDEX r_conversations_view_length ON r_conversations (view_length, id)",
]
_GUARD = (
    "UPDATE {} SET updated_at = ?, version = ?, view_length = ?, state = ?, "
    "last_hash = ? WHERE num = ? AND version = ? AND last_hash = ?"
)
_LOG = (
    "INSERT INTO d_events VALUES (?, ?, ?, ?, ?, "
    "(SELECT coalesce(max(position), 0) + 1 FROM d_events))"
)
_EXTEND_SPAN = (
    "UPDATE d_view_spans SET last_seq = ? WHERE num = ? AND first_seq = ? AND left_seq IS NULL"
)
_NEW_SPAN = "INSERT INTO d_view_spans VALUES (?, ?, ?, NULL)"
_CLOSE_INDEX = "UPDATE d_indices SET to_seq = ? WHERE num = ? AND position = ? AND to_seq IS NULL"
_OPEN_INDEX = "INSERT INTO d_indices VALUES (?, ?, ?, NULL)"


class Redesign:
    """One conversation appended to in the redesign's tables, one event a transaction."""

    def __init__(
        self,
        driver: sqlite3.Connection,
        num: int,
        max_bytes: int,
        catalogue: str = "r_conversations",
    ) -> None:
        self.driver = driver
        self.num = num
        self.max_bytes = max_bytes
        self.guard = _GUARD.format(catalogue)
        self.tail = Tail(ProjectionState(), "0" * 64)
        self.span: tuple[int, int] | None = None  # the open span: first and last seq
        now = _micros(datetime.now(UTC))
        driver.execute(
            f"INSERT INTO {catalogue} VALUES (?, ?, ?, ?, 0, 0, '[]', ?)",
            (num, uuid.uuid4().hex, now, now, bytes(32)),
        )

    def work(self, event: dict[str, Any]) -> fast_path.Plan:
        """The Python side of one append: what viewstore's fast path computes too."""
        (parsed,) = parse_batch([event], self.max_bytes)
        return fast_path.plan(str(self.num), self.tail, [parsed], datetime.now(UTC))

    def append(self, event: dict[str, Any]) -> None:
        p = self.work(event)
        d, num = self.driver, self.num
        row = p.log[0]
        seq = row["seq"]
        d.execute("BEGIN IMMEDIATE")
        guard = d.execute(
            self.guard,
            (
                _micros(p.now),
                seq,
                p.tail.state.tracker.length,
                json.dumps(sorted(p.tail.state.tracker.pending, key=str)),
                bytes.fromhex(p.tail.last_hash),
                num,
                p.previous.state.version,
                bytes.fromhex(p.previous.last_hash),
            ),
        )
        assert guard.rowcount == 1
        d.execute(
            _LOG,
            (
                num << 32 | seq,
                _id_hash(row["event_id"]),
                row["payload"],
                bytes.fromhex(row["hash"]),
                _micros(p.now),
            ),
        )
        if p.projection.new_entries:
            if self.span is not None and self.span[1] == seq - 1:
                d.execute(_EXTEND_SPAN, (seq, num, self.span[0]))
                self.span = (self.span[0], seq)
            else:
                d.execute(_NEW_SPAN, (num, seq, seq))
                self.span = (seq, seq)
        for position, to_seq in p.projection.closed_indices.items():
            d.execute(_CLOSE_INDEX, (to_seq, num, position))
        for index in p.projection.new_indices:
            d.execute(_OPEN_INDEX, (num, index.position, index.from_seq))
        d.execute("COMMIT")
        self.tail = p.tail


def _design_file(path: str, catalogue: str) -> tuple[Engine, sqlite3.Connection]:
    """A SQLite file of its own for one redesign writer, so that its conversation is the only
    one in the log, as viewstore's is in its file: inserted in the middle of another
    conversation's keys, a row splits pages that an append at the end does not."""
    driver = sqlite3.connect(path, isolation_level=None)
    driver.execute("PRAGMA journal_mode = WAL")  # first: a connection opened before keeps its mode
    driver.execute("PRAGMA synchronous = NORMAL")
    engine = create_engine(f"sqlite:///{path}")
    create_design(engine)
    with engine.begin() as conn:
        for statement in _CATALOGUE:
            if catalogue in statement:
                conn.exec_driver_sql(statement)
    return engine, driver


def _checkpointed(driver: sqlite3.Connection, write: Callable[[], object]) -> Callable[[], object]:
    """``write``, then the checkpoint of its own file (as ``bench_store.checkpoint`` does)."""
    return lambda: (write(), driver.execute("PRAGMA wal_checkpoint(PASSIVE)"))


def measure(url: str, blocks: int, block: int, seed: int) -> dict[str, Any]:
    store = EventStore(url)
    store.create_schema()
    _raw_meta.create_all(store.engine)
    engine = store.engine.execution_options(**WRITE)
    database = str(engine.url.database)
    files = {
        "redesign": _design_file(database + "-redesign", "r_conversations"),
        "redesign_unordered": _design_file(database + "-unordered", "r_unordered"),
    }
    # Enough events for the timed blocks, then a block each to count pages.
    count = blocks * block + 10
    events = fresh_events(count + block // 4, seed)
    key = f"floor-{uuid.uuid4().hex[:8]}"
    build(store, key, events[:10])
    redesign = Redesign(files["redesign"][1], 1, store.max_event_bytes)
    unordered = Redesign(
        files["redesign_unordered"][1], 1, store.max_event_bytes, catalogue="r_unordered"
    )
    for event in events[:10]:
        redesign.append(event)
        unordered.append(event)
    worker = Redesign(files["redesign"][1], 2, store.max_event_bytes)

    def raw_insert(event: dict[str, Any]) -> None:
        payload = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        with engine.begin() as conn:
            conn.execute(
                insert(raw_events),
                {"conversation_id": key, "event_id": event["id"], "payload": payload},
            )

    def work_only(event: dict[str, Any]) -> None:
        worker.tail = worker.work(event).tail

    sides: dict[str, Callable[[dict[str, Any]], object]] = {
        "viewstore": lambda event: store.append(key, [event]),
        "raw": raw_insert,
        "redesign": redesign.append,
        "redesign_unordered": unordered.append,
        "work_only": work_only,
    }
    samples: dict[str, list[float]] = {name: [] for name in sides}
    checkpoint(store)
    cursor = 10
    for _ in range(blocks):
        chunk = events[cursor : cursor + block]
        cursor += block
        for name, write in sides.items():

            def run(write: Callable[[dict[str, Any]], object] = write, chunk: Any = chunk) -> None:
                for event in chunk:
                    write(event)

            if name in files:
                samples[name].append(timed(_checkpointed(files[name][1], run)) / len(chunk))
            else:
                samples[name].append(timed_block(store, run, len(chunk)))
    # The same events for each, as in the timed blocks (ids need only be unique per conversation).
    quarter = block // 4
    chunk = events[cursor : cursor + quarter]
    pages = {}
    for name in _WRITERS:
        pending = iter(chunk)
        write = sides[name]

        def one(write: Callable[[dict[str, Any]], object] = write, pending: Any = pending) -> None:
            write(next(pending))

        pages[name] = pages_per_call(
            files[name][0] if name in files else store.engine, one, quarter
        )
    for file_engine, driver in files.values():
        driver.close()
        file_engine.dispose()
    store.close()
    ms = {name: median(values) * 1e3 for name, values in samples.items()}
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "ms_per_append": ms,
        "viewstore_ratio": ms["raw"] / ms["viewstore"],
        "redesign_ratio": ms["raw"] / ms["redesign"],
        "redesign_unordered_ratio": ms["raw"] / ms["redesign_unordered"],
        "work_share_of_raw": ms["work_only"] / ms["raw"],
        "target": f">= {TARGET}",
        "pages_per_append": pages,
    }


def report(r: dict[str, Any]) -> str:
    ms, pages = r["ms_per_append"], r["pages_per_append"]
    lines = [
        "one-event SQLite append: viewstore, raw INSERT+COMMIT, a slimmer schema (target "
        f"{r['target']}x raw)",
        f"  ms per append: viewstore {ms['viewstore']:.3f}, raw {ms['raw']:.3f}, redesign "
        f"{ms['redesign']:.3f}, without the catalogue's order indexes "
        f"{ms['redesign_unordered']:.3f}, Python work alone {ms['work_only']:.3f}",
        f"  ratio to raw: viewstore {r['viewstore_ratio']:.2f}x, redesign "
        f"{r['redesign_ratio']:.2f}x, without the order indexes "
        f"{r['redesign_unordered_ratio']:.2f}x; the Python work alone costs "
        f"{r['work_share_of_raw']:.0%} of a raw append",
    ]
    for name in _WRITERS:
        parts = ", ".join(f"{t} {n:.2f}" for t, n in pages[name].items() if t != "total")
        lines.append(f"  WAL pages per append, {name}: {pages[name]['total']:.2f} ({parts})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="a new SQLite file (sqlite:///path)")
    parser.add_argument("--blocks", type=int, default=7)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.url.startswith("sqlite"):
        parser.error("the append floor is SQLite's target: give a sqlite:/// URL")
    results = measure(args.url, args.blocks, args.block, 1)
    print(report(results))
    save(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
