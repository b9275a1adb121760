"""Appends are incremental: a plain append writes O(1) rows whatever the history length, and a
condensation rewrites only what it changed. Counted three ways: ``AppendResult.rows_written``,
row counts in the tables, and the statements (with their row counts) that reach the driver."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine, event

from viewstore import EventStore
from viewstore.store import event_store
from viewstore.store.append import fast_path

from ..store._helpers import A, C, M, O, Payload, R, U, X, count_rows, history

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

WRITES = ("INSERT", "UPDATE", "DELETE")
PROJECTION_TABLES = ("view_entries", "manipulation_indices")


@dataclass
class Statements:
    """Every statement one append sent: text, and for writes the number of rows touched."""

    executed: list[tuple[str, int | None]] = field(default_factory=list)

    def writes(self) -> list[tuple[str, str, int]]:
        out = []
        for sql, rowcount in self.executed:
            verb = sql.split(None, 1)[0].upper()
            if verb in WRITES:
                match = re.search(r"(?:INTO|UPDATE|FROM)\s+(\w+)", sql, re.IGNORECASE)
                assert match is not None, sql
                assert rowcount is not None
                out.append((verb, match.group(1), rowcount))
        return out

    def rows(self, *tables: str) -> int:
        return sum(n for _, table, n in self.writes() if table in tables)

    def texts(self) -> list[str]:
        return [sql for sql, _ in self.executed]


@contextmanager
def recording(engine: Engine) -> Iterator[Statements]:
    statements = Statements()

    def after(conn: Any, cursor: Any, sql: str, *_: Any) -> None:
        verb = sql.split(None, 1)[0].upper()
        statements.executed.append((sql, cursor.rowcount if verb in WRITES else None))

    event.listen(engine, "after_cursor_execute", after)
    try:
        yield statements
    finally:
        event.remove(engine, "after_cursor_execute", after)


def build(store: EventStore, cid: str, events: list[Payload]) -> None:
    for start in range(0, len(events), 500):
        store.append(cid, events[start : start + 500])


def table_counts(store: EventStore, cid: str) -> dict[str, int]:
    return {
        table: count_rows(store.engine, table, "conversation_id = :c", c=cid)
        for table in PROJECTION_TABLES
    }


# The same tail appended, one call each, to a short and to a long conversation.
TAIL: list[Payload] = [
    U("t-u"),
    A("t-a1", "t-tc1", "t-r", thinking=True),
    A("t-a2", "t-tc2", "t-r", thinking=True),
    O("t-o2", "t-tc2"),
    O("t-o1", "t-tc1"),
    X("t-x"),
    R("t-req"),
    M("t-m"),
]


@pytest.fixture
def ordinary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the ordinary (locked, SQLAlchemy) append path: a set crash hook disables the fast
    path, whose writes tests/contract/test_fast_path.py and the fast tests below count instead."""
    monkeypatch.setattr(event_store, "append_hook", lambda _point: None)


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[fast_path.Plan]:
    """Every fast-path plan made: what the fast path writes, row for row."""
    made: list[fast_path.Plan] = []
    original = fast_path.plan

    def spy(*args: Any) -> fast_path.Plan:
        made.append(original(*args))
        return made[-1]

    monkeypatch.setattr(fast_path, "plan", spy)
    return made


def shape(plan: fast_path.Plan, dialect: Any) -> tuple[Any, ...]:
    """What a fast write sends: the statement(s) and how many rows of each table."""
    projection = plan.projection
    counts = (
        len(plan.log),
        len(projection.new_entries),
        len(projection.closed_entries),
        len(projection.new_indices),
        len(projection.closed_indices),
    )
    if dialect.name == "postgresql":
        sql, params = fast_path.postgres_statement(dialect, plan)
        return (*counts, sql, sorted(params))
    return counts


@pytest.mark.usefixtures("ordinary")
def test_plain_append_on_a_long_history_writes_o1_rows(store: EventStore) -> None:
    build(store, "long", history(1000))
    assert store.version("long") == 2003
    for payload in TAIL:
        before = table_counts(store, "long")
        with recording(store.engine) as statements:
            result = store.append("long", payload)
        after = table_counts(store, "long")
        assert result.rows_written <= 3, payload["id"]
        # Each projection row written is one the table gained (insert) or closed (update).
        assert statements.rows(*PROJECTION_TABLES) == result.rows_written
        assert after["view_entries"] - before["view_entries"] <= 1
        assert after["manipulation_indices"] - before["manipulation_indices"] <= 1
        # The whole transaction: one event row, one conversation row, a few projection rows.
        assert statements.rows("events") == 1
        assert statements.rows("conversations") == 1
        assert sum(n for *_, n in statements.writes()) <= 5
        assert len(statements.executed) <= 12
    assert store.verify("long").ok


@pytest.mark.usefixtures("ordinary")
def test_append_cost_does_not_grow_with_history(store: EventStore) -> None:
    build(store, "short", history(50))
    build(store, "long", history(1000))
    assert (store.version("short"), store.version("long")) == (103, 2003)
    for payload in TAIL:
        costs = {}
        for cid in ("short", "long"):
            with recording(store.engine) as statements:
                result = store.append(cid, payload)
            costs[cid] = (statements.texts(), statements.writes(), result.rows_written)
        assert costs["short"][0], "the ordinary path ran statements"
        assert costs["short"] == costs["long"], payload["id"]
    assert store.verify().ok


def test_fast_append_on_a_long_history_writes_o1_rows(
    store: EventStore, plans: list[fast_path.Plan]
) -> None:
    build(store, "long", history(1000))
    store.append("long", [X("warm")])  # the fast path needs the tail of a committed append
    for payload in TAIL:
        before = table_counts(store, "long")
        events_before = count_rows(store.engine, "events", "conversation_id = 'long'")
        made = len(plans)
        result = store.append("long", payload)
        assert len(plans) == made + 1, "the append took the fast path"
        after = table_counts(store, "long")
        assert result.rows_written <= 3, payload["id"]
        assert after["view_entries"] - before["view_entries"] <= 1
        assert after["manipulation_indices"] - before["manipulation_indices"] <= 1
        assert count_rows(store.engine, "events", "conversation_id = 'long'") == events_before + 1
        projection = plans[-1].projection
        assert not projection.closed_entries
        assert len(projection.new_indices) + len(projection.closed_indices) <= 2
    assert store.verify("long").ok


def test_fast_append_cost_does_not_grow_with_history(
    store: EventStore, plans: list[fast_path.Plan]
) -> None:
    build(store, "short", history(50))
    build(store, "long", history(1000))
    for cid in ("short", "long"):
        store.append(cid, [X(f"warm-{cid}")])
    for payload in TAIL:
        shapes = {}
        for cid in ("short", "long"):
            made = len(plans)
            store.append(cid, payload)
            assert len(plans) == made + 1, "the append took the fast path"
            shapes[cid] = shape(plans[-1], store.engine.dialect)
        assert shapes["short"] == shapes["long"], payload["id"]
    assert store.verify().ok


def test_condensation_closes_exactly_the_forgotten_entries(store: EventStore) -> None:
    build(store, "long", history(1000))
    forgotten = ["a3", "o3", "a4", "o4", "a500", "o500", "M"]
    k = len(forgotten)
    before_view = store.view("long")
    before = table_counts(store, "long")
    with recording(store.engine) as statements:
        result = store.append("long", C("c1", [*forgotten, "never-stored"]))
    after_view = store.view("long")
    after = table_counts(store, "long")
    seq = result.version

    assert after_view.event_ids == [i for i in before_view.event_ids if i not in forgotten]
    closed = count_rows(
        store.engine, "view_entries", "conversation_id = 'long' AND left_seq = :s", s=seq
    )
    assert closed == k
    assert after["view_entries"] == before["view_entries"]  # closed, never deleted
    assert ("UPDATE", "view_entries", k) in statements.writes()
    assert statements.rows("view_entries") == k
    # Index rows: exactly the positions that stopped or started being indices.
    old, new = set(before_view.manipulation_indices), set(after_view.manipulation_indices)
    assert statements.rows("manipulation_indices") == len(old ^ new)
    assert after["manipulation_indices"] - before["manipulation_indices"] == len(new - old)
    assert result.rows_written == k + len(old ^ new)
    assert not any(verb == "DELETE" for verb, *_ in statements.writes())
    assert store.verify("long").ok


def test_condensation_with_summary_adds_one_entry(store: EventStore) -> None:
    build(store, "long", history(1000))
    before = table_counts(store, "long")
    result = store.append("long", C("c1", ["U", "a0", "o0"], "the story so far", 1))
    after = table_counts(store, "long")
    assert after["view_entries"] == before["view_entries"] + 1
    view = store.view("long")
    assert view.event_ids[:3] == ["S", "c1-summary", "a1"]
    closed = count_rows(
        store.engine,
        "view_entries",
        "conversation_id = 'long' AND left_seq = :s",
        s=result.version,
    )
    assert closed == 3
    assert store.verify("long").ok
