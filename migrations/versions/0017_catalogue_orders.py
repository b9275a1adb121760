"""Indexes for the catalogue's orders.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26

``conversations(order_by=...)`` sorted the whole catalogue for every page but the one by id
(the primary key), and ``updated_since``, ``min_view_length`` and the inactive scan read every
conversation row. One index per order, each ending in ``id`` (the tie-breaker that makes the
order total, and what a keyset cursor carries), serves a page of any order in either direction
(read backwards for a descending one) by reading that page's rows only:

- ``ix_conversations_created_at_id``
- ``ix_conversations_updated_at_id`` (also ``updated_since`` and ``inactive_conversations``)
- ``ix_conversations_version_id``
- ``ix_conversations_view_length_id`` (also ``min_view_length``)

On a PostgreSQL store that holds conversations they are built online: ``CREATE INDEX
CONCURRENTLY``, which cannot run in a transaction, so the migrations before this one are
committed first and the migration lock (transaction-scoped) is taken again afterwards. A build
waits for every transaction older than it; appends and reads go on meanwhile. On a partitioned
store the parent's index is created ``ON ONLY`` the parent (invalid until complete), each
partition's concurrently, and each attached to it. Citus propagates a concurrent build to the
shards. An empty store (a new one, migrated in one transaction) and SQLite get a plain
``CREATE INDEX`` in the migration's transaction.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from viewstore.store.revisions import MIGRATION_LOCK_KEY

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

ORDERS = ("created_at", "updated_at", "version", "view_length")


def _name(column: str) -> str:
    return f"ix_conversations_{column}_id"


def upgrade() -> None:
    bind = op.get_bind()
    populated = bind.dialect.name == "postgresql" and bool(
        bind.execute(sa.text("SELECT EXISTS (SELECT 1 FROM conversations)")).scalar()
    )
    if not populated:
        for column in ORDERS:
            op.create_index(_name(column), "conversations", [column, "id"])
        return
    # CREATE INDEX CONCURRENTLY waits for every transaction holding an older snapshot, so this
    # one must hold nothing another migrator waits for: the migration lock goes with the commit.
    bind.commit()
    autocommit = bind.execution_options(isolation_level="AUTOCOMMIT")
    try:
        partitions = [
            str(name)
            for name in autocommit.execute(
                sa.text(
                    "SELECT inhrelid::regclass::text FROM pg_inherits "
                    "WHERE inhparent = to_regclass('conversations') ORDER BY 1"
                )
            ).scalars()
        ]
        for column in ORDERS:
            _build(autocommit, column, partitions)
    finally:
        bind.commit()  # ends SQLAlchemy's autobegun (autocommit) transaction: nothing to commit
        bind.execution_options(isolation_level=bind.default_isolation_level)
    # The rest of the upgrade (the version row) under the migration lock again.
    bind.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})


def _build(conn: sa.Connection, column: str, partitions: list[str]) -> None:
    name, columns = _name(column), f"{column}, id"
    _drop_invalid(conn, name)
    if not partitions:
        conn.execute(
            sa.text(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON conversations ({columns})")
        )
        return
    # A partitioned table takes no concurrent build: its index is made ON ONLY the parent
    # (invalid), each partition's concurrently, and it is valid once all are attached.
    conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {name} ON ONLY conversations ({columns})"))
    for partition in partitions:
        child = f"{partition.split('.')[-1]}_{column}_id_idx"
        _drop_invalid(conn, child)
        conn.execute(
            sa.text(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {child} ON {partition} ({columns})")
        )
        attached = conn.execute(
            sa.text(
                "SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhparent = to_regclass(:p) "
                "AND inhrelid = to_regclass(:c))"
            ),
            {"p": name, "c": child},
        ).scalar()
        if not attached:
            conn.execute(sa.text(f"ALTER INDEX {name} ATTACH PARTITION {child}"))


def _drop_invalid(conn: sa.Connection, name: str) -> None:
    """An index a failed concurrent build left behind (invalid, never used): built again."""
    invalid = conn.execute(
        sa.text(
            "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
            "WHERE i.indexrelid = to_regclass(:n) AND NOT i.indisvalid AND c.relkind = 'r')"
        ),
        {"n": name},
    ).scalar()
    if invalid:
        conn.execute(sa.text(f"DROP INDEX CONCURRENTLY {name}"))


def downgrade() -> None:
    for column in ORDERS:
        op.drop_index(_name(column), table_name="conversations")
