"""Migration 0003 fills the view rows' copies of their events from the log.

A database taken down to 0002 holds its data the way 0002 kept it (summaries in
``summary_payload``, no copies); upgraded again, every row gets back exactly what the store
writes today, the reads are unchanged, and verify() finds nothing to report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from viewstore import EventStore, SchemaError

from ..store._helpers import A, C, M, O, R, S, U, X, load_vectors
from ..store.test_view_rows import rich_history
from .test_migrations import downgrade, drift, upgrade

SQL_VIEWS = ("attention_window", "view_history")


def fill(store: EventStore, vectors_dir: Path) -> list[str]:
    """Conversations with summaries (one of a source-less condensation), real SDK events
    (timestamps, parent ids), closed rows, and a few more than one backfill batch (1,000)."""
    store.append("rich", rich_history())
    store.append("rich", [A("a2", "t2", "r2"), O("o2", "t2"), C("c2", ["m1"], "again", 0)])
    for vector in load_vectors(vectors_dir, "cases")[:5]:
        store.append(vector.name, vector.lines)
    long = [S(), U("u")]
    for i in range(600):
        long += [A(f"a{i}", f"t{i}", f"r{i}"), O(f"o{i}", f"t{i}")]
    store.append("long", [*long, X("x"), R("r"), C("c", [f"a{i}" for i in range(50)]), M("m")])
    return store.conversation_ids()


def view_entries(store: EventStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        found = conn.execute(text("SELECT * FROM view_entries ORDER BY conversation_id, order_key"))
        return [tuple(row) for row in found]


def analyst_rows(store: EventStore, keys: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """What analysts see, but for the source of a summary: 0002 showed its condensation's
    (null when the condensation had none), 0003 the summary event's ("environment" then)."""
    out = {}
    with store.engine.connect() as conn:
        for view in SQL_VIEWS:
            found = conn.execute(
                text(
                    f"SELECT conversation_id, event_id, kind, timestamp, payload, seq, "
                    f"CASE WHEN event_id LIKE '%-summary' THEN NULL ELSE source END "
                    f"FROM {view} WHERE conversation_id IN ('rich', 'long') "
                    "ORDER BY conversation_id, event_id"
                )
            )
            out[view] = [tuple(str(value) for value in row) for row in found]
    assert {row[0] for row in out["attention_window"]} == {"rich", "long"}, keys
    return out


def test_upgrade_from_0002_fills_every_copy_as_the_store_writes_it(
    db_url: str, vectors_dir: Path
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        keys = fill(store, vectors_dir)
        views = {key: store.view(key) for key in keys}
        old_views = {key: store.view(key, as_of=store.version(key) // 2) for key in keys}
        written = view_entries(store)
        analysts = analyst_rows(store, keys)

        downgrade(store, "0002")
        columns = {column["name"] for column in inspect(store.engine).get_columns("view_entries")}
        assert "summary_payload" in columns
        assert not columns & {"payload", "source", "timestamp", "parent_id", "envelope"}
        with store.engine.connect() as conn:
            summaries = conn.execute(
                text(
                    "SELECT event_id FROM view_entries WHERE summary_payload IS NOT NULL "
                    "AND conversation_id = 'rich'"
                )
            ).scalars()
            assert sorted(summaries) == ["c1-summary", "c2-summary"]
        assert analyst_rows(store, keys) == analysts  # 0002's views, joined to the log

        upgrade(store)  # to head: 0003, then 0004 (the log's indexes)
        assert drift(store) == []
        assert view_entries(store) == written
        assert analyst_rows(store, keys) == analysts
        assert {key: store.view(key) for key in keys} == views
        assert {key: store.view(key, as_of=old.version) for key, old in old_views.items()} == (
            old_views
        )
        report = store.verify()
        assert report.ok, report.render()
    with EventStore(db_url) as store:  # and appends go on as before
        store.append("rich", [U("u3")])
        assert store.view("rich").event_ids[-1] == "u3"
        assert store.verify("rich").ok


def test_current_reads_use_the_partial_index_after_the_upgrade(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [S(), U("u1")])
        downgrade(store, "0002")
        upgrade(store, "0003")
        indexes = inspect(store.engine).get_indexes("view_entries")
        (current,) = [index for index in indexes if index["name"] == "ix_view_entries_current"]
        assert current["column_names"] == ["conversation_id", "order_key"]
        where = current["dialect_options"].get(f"{store.engine.dialect.name}_where")
        assert "left_seq IS NULL" in str(where)


def test_reading_a_database_still_at_0002_asks_for_the_migration(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [S(), U("u1")])
        downgrade(store, "0002")
        with pytest.raises(SchemaError, match="create_schema"):
            store.view("c")
        upgrade(store)  # to head: a read needs every revision
        assert store.view("c").event_ids == ["S", "u1"]
