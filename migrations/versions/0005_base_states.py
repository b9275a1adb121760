"""The OpenHands SDK's base_state.json, one row per conversation.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

``viewstore.openhands`` keeps each conversation's base state (agent settings, stats, the HEAD
of the event tree) here: ``revision`` counts the writes and ``at_version`` records the
conversation version the writer had seen (see ``EventStore.save_base_state``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "base_states",
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("at_version", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_base_states"),
    )


def downgrade() -> None:
    op.drop_table("base_states")
