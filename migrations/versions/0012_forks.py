"""Forks: a conversation may start from another's prefix without copying it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24

A fork's row names the conversation it was forked from and the seq it was forked at; its
events 1..fork_seq are that conversation's, read from there, and only its own events (and a
copy of the view and index rows alive at fork_seq) are stored under its id
(``viewstore/store/lifecycle/forking.py``). ``family_id`` is the first conversation of the fork's line,
which every fork inherits: the key a sharded store can place a whole family by
(docs/distribution.md). The columns are empty on conversations that are not forks, so existing
rows need no backfill. No foreign key: a fork and its source may live on different shards, and
the store itself refuses to erase a conversation that still has forks.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("conversations", sa.Column("forked_from", sa.String(255), nullable=True))
    op.add_column("conversations", sa.Column("fork_seq", sa.BigInteger(), nullable=True))
    op.add_column("conversations", sa.Column("family_id", sa.String(255), nullable=True))
    op.create_index("ix_conversations_forked_from", "conversations", ["forked_from"])


def downgrade() -> None:
    op.drop_index("ix_conversations_forked_from", table_name="conversations")
    for column in ("family_id", "fork_seq", "forked_from"):
        op.drop_column("conversations", column)
