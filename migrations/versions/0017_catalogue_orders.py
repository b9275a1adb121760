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
``CREATE INDEX`` in the migration's transaction (``viewstore.store.database.online_index``).
"""

from __future__ import annotations

from alembic import op

from viewstore.store.database import online_index

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

ORDERS = ("created_at", "updated_at", "version", "view_length")


def _name(column: str) -> str:
    return f"ix_conversations_{column}_id"


def upgrade() -> None:
    indexes = [(_name(column), f"({column}, id)") for column in ORDERS]
    online_index.create(op.get_bind(), "conversations", indexes)


def downgrade() -> None:
    for column in ORDERS:
        op.drop_index(_name(column), table_name="conversations")
