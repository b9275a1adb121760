"""The stretch of left view rows a resume reads comes from the primary key: one index fewer.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27

Revision 0019 gave the rows that left a view two partial indexes, for a resume computed from
rows. One of them, ``ix_view_entries_left`` on ``(conversation_id, seq)``, served the stretch
of the log around the view's tool events. An event's row is keyed by its seq for life
(``viewstore.domain.order_key``: ``order_key`` is the seq written in 16 digits), so the same stretch
is a range of the primary key ``(conversation_id, order_key)``, which every row is in anyway.
On a condensed conversation, where nearly every row has left the view, the index was one entry
per event: 47 bytes an event on SQLite, 78 on PostgreSQL (docs/schema.md). The other index,
``ix_view_entries_left_actions``, stays: an LLM response's forgotten actions are not a range of
keys.

Dropped online (``viewstore.store.database.online_index.drop``): ``DROP INDEX CONCURRENTLY``
on a PostgreSQL store holding rows, a plain drop elsewhere. The downgrade builds it again as
revision 0019 did, online.
"""

from __future__ import annotations

from alembic import op

from viewstore.store.database import online_index

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

INDEX = ("ix_view_entries_left", "(conversation_id, seq) WHERE left_seq IS NOT NULL")


def upgrade() -> None:
    online_index.drop(op.get_bind(), "view_entries", [INDEX[0]])


def downgrade() -> None:
    online_index.create(op.get_bind(), "view_entries", [INDEX])
