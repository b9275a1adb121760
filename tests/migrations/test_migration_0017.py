"""Migration 0017 adds the catalogue's order indexes: on a new store in the migration's
transaction, on a PostgreSQL store holding conversations online (``CREATE INDEX
CONCURRENTLY``, partition by partition on the partitioned layout), through ``create_schema()``
and through Alembic's own transaction; the result equals a new store's schema."""

from __future__ import annotations

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from viewstore import EventStore
from viewstore.store.event_store import alembic_config

from ..store._helpers import LAYOUTS, M, S, U, layout_url
from .test_migrations import downgrade, drift, upgrade

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

INDEXES = {
    f"ix_conversations_{column}_id"
    for column in ("created_at", "updated_at", "version", "view_length")
}


def _fill(store: EventStore, count: int = 12) -> None:
    with store.begin() as conn:
        for i in range(count):
            store.append(
                f"c{i:02d}", [S(), U("u"), *(M(f"m{j}") for j in range(i % 3))], connection=conn
            )


def _indexes(conn: Connection) -> dict[str, bool]:
    """The conversations table's order indexes, and whether each is valid (usable)."""
    if conn.dialect.name == "sqlite":
        query = (
            "SELECT name, 1 FROM sqlite_master WHERE type = 'index' AND tbl_name = 'conversations'"
        )
    else:
        query = (
            "SELECT c.relname, i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = to_regclass('conversations')"
        )
    found = {str(name): bool(valid) for name, valid in conn.execute(text(query))}
    return {name: valid for name, valid in found.items() if name in INDEXES}


def _check_upgraded(store: EventStore) -> None:
    assert store.schema_revision() == HEAD
    with store.engine.connect() as conn:
        assert _indexes(conn) == dict.fromkeys(INDEXES, True)
        if conn.dialect.name == "postgresql":
            # Each partition's index is attached to the parent's (none on a plain table).
            children = conn.execute(
                text(
                    "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent "
                    "WHERE c.relname LIKE 'ix_conversations_%_id'"
                )
            ).scalar_one()
            partitions = conn.execute(
                text(
                    "SELECT count(*) FROM pg_inherits "
                    "WHERE inhparent = to_regclass('conversations')"
                )
            ).scalar_one()
            assert children == len(INDEXES) * partitions
        else:
            partitions = 0
    if not partitions:  # (a partitioned store's partitions are tables Alembic knows nothing of)
        assert drift(store) == []
    ordered = store.conversations(order_by="view_length", descending=True, limit=3)
    assert [r.view_length for r in ordered] == [4, 4, 4]
    assert store.verify().ok


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_store_holding_conversations_gets_the_indexes(
    request: pytest.FixtureRequest, layout: str
) -> None:
    url, partitions = layout_url(request, layout)
    with EventStore(url) as store:
        # Filled at head and taken down: this code writes the rows of revision 0022's shape.
        store.create_schema(partitions=partitions)
        _fill(store)
        downgrade(store, "0016")
        with store.engine.connect() as conn:
            assert _indexes(conn) == {}
        store.create_schema()  # PostgreSQL: the concurrent build, outside a transaction
        _check_upgraded(store)
        store.create_schema()  # at head: nothing to do
        _check_upgraded(store)


@pytest.mark.postgres
def test_the_concurrent_build_in_alembics_own_transaction(fresh_pg_url: str) -> None:
    """The tests' and the command line's way in: Alembic begins the transaction itself."""
    with EventStore(fresh_pg_url) as store:
        upgrade(store)
        _fill(store)
        downgrade(store, "0016")
        upgrade(store)
        _check_upgraded(store)
        downgrade(store, "0016")
        with store.engine.connect() as conn:
            assert _indexes(conn) == {}
        upgrade(store)
        _check_upgraded(store)


def test_a_new_store_has_them(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        with store.engine.connect() as conn:
            assert _indexes(conn) == dict.fromkeys(INDEXES, True)
            partitioned = (
                conn.dialect.name == "postgresql"
                and conn.execute(text("SELECT EXISTS (SELECT 1 FROM pg_inherits)")).scalar_one()
            )
        if not partitioned:
            assert drift(store) == []
