"""Leaner log indexes: three fewer index writes per appended event.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22

Every event appended updated six indexes of ``events``. Three served no query of the store:

- ``ix_events_event_id`` (an id across all conversations): dropped;
- ``ix_events_conversation_id_kind_seq``: only the request flag as of an old seq read it, and
  only for requests; replaced by ``ix_events_requests``, a partial index holding requests
  alone (the last condensation at a seq comes from ``condensations``' primary key);
- the feed's position indexes were doubled: SQLite keeps ``uq_events_position`` (txid is always
  0 there) and loses ``ix_events_txid_position``; PostgreSQL, whose positions come from a
  sequence, keeps ``ix_events_txid_position`` and loses the unique constraint.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_REQUESTS = sa.text("kind = 'CondensationRequest'")


def upgrade() -> None:
    op.drop_index("ix_events_event_id", table_name="events")
    op.drop_index("ix_events_conversation_id_kind_seq", table_name="events")
    op.create_index(
        "ix_events_requests",
        "events",
        ["conversation_id", "seq"],
        postgresql_where=_REQUESTS,
        sqlite_where=_REQUESTS,
    )
    if op.get_bind().dialect.name == "sqlite":
        op.drop_index("ix_events_txid_position", table_name="events")
    else:
        op.drop_constraint("uq_events_position", "events", type_="unique")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.create_index("ix_events_txid_position", "events", ["txid", "position"])
    else:
        op.create_unique_constraint("uq_events_position", "events", ["position"])
    op.drop_index("ix_events_requests", table_name="events")
    op.create_index(
        "ix_events_conversation_id_kind_seq", "events", ["conversation_id", "kind", "seq"]
    )
    op.create_index("ix_events_event_id", "events", ["event_id"])
