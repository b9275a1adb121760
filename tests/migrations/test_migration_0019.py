"""Migration 0019 adds the indexes of rows that left a view: on a store holding conversations
online (PostgreSQL: ``CREATE INDEX CONCURRENTLY``, partition by partition where partitioned),
in the migration's transaction otherwise; a resume reads through them and equals a full one.
Migration 0025 drops ``ix_view_entries_left`` the same way (a resume reads that stretch from
the primary key), and its downgrade builds it again."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, text

from viewstore import EventStore
from viewstore.domain.view import View

from ..store._helpers import LAYOUTS, layout_url
from ..store.test_resume_rows_plan import _history
from .test_migrations import downgrade, drift, upgrade

INDEXES = {"ix_view_entries_left", "ix_view_entries_left_actions"}
#: What revision 0025 keeps.
KEPT = {"ix_view_entries_left_actions"}


def _indexes(conn: Connection) -> dict[str, bool]:
    if conn.dialect.name == "sqlite":
        query = "SELECT name, 1 FROM sqlite_master WHERE type = 'index'"
    else:
        query = (
            "SELECT c.relname, i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass('view_entries')"
        )
    found = {str(name): bool(valid) for name, valid in conn.execute(text(query))}
    return {name: valid for name, valid in found.items() if name in INDEXES}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_store_holding_conversations_gets_the_indexes(
    request: pytest.FixtureRequest, layout: str
) -> None:
    url, partitions = layout_url(request, layout)
    with EventStore(url) as store:
        # Filled at head and taken down: this code writes the rows of revision 0022's shape.
        store.create_schema(partitions=partitions)
        _history(store, 60)
        downgrade(store, "0018")
        with store.engine.connect() as conn:
            assert _indexes(conn) == {}
        upgrade(store, "0019")
        _assert_built(store, INDEXES, partitions)
        store.create_schema()
        _assert_built(store, KEPT, partitions)
        downgrade(store, "0024")
        _assert_built(store, INDEXES, partitions)
        store.create_schema()
        _assert_built(store, KEPT, partitions)
        if partitions is None:
            assert drift(store) == []
        full = View.from_events([e.payload_json for e in store.events("long")])
        assert store.resume_view("long").event_ids == [e.id for e in full.events]
        assert store.verify().ok


def _assert_built(store: EventStore, names: set[str], partitions: int | None) -> None:
    """Exactly ``names`` of ``INDEXES`` exist, valid, on every partition."""
    with store.engine.connect() as conn:
        assert _indexes(conn) == dict.fromkeys(names, True)
        if conn.dialect.name == "postgresql":
            attached = conn.execute(
                text(
                    "SELECT count(*) FROM pg_inherits i JOIN pg_class c "
                    "ON c.oid = i.inhparent WHERE c.relname LIKE 'ix_view_entries_left%'"
                )
            ).scalar_one()
            assert attached == len(names) * (partitions or 0)
