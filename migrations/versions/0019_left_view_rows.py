"""Indexes of the view rows that left a view, for a resume computed from rows.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25

A resume view is the live view less what enforcement removes (``viewstore.store.read.resume_check``):
besides the live view it reads the rows that left it in the stretch of the log around the
view's tool events, and the actions that left it of the LLM responses it still holds. Both
were found by reading every view row of the conversation (its whole history, payload copies
and all). Two partial indexes name them, and cost nothing on an append (a row enters with no
``left_seq``); a row is added to them when a condensation makes it leave:

- ``ix_view_entries_left``: ``(conversation_id, seq)`` where ``left_seq IS NOT NULL``;
- ``ix_view_entries_left_actions``: ``(conversation_id, llm_response_id)`` where
  ``left_seq IS NOT NULL AND role = 'action'``.

Built as revision 0017's indexes are (``viewstore.store.database.online_index``): online on a
PostgreSQL store holding rows, in the migration's transaction otherwise.
"""

from __future__ import annotations

from alembic import op

from viewstore.store.database import online_index

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

INDEXES = (
    ("ix_view_entries_left", "(conversation_id, seq) WHERE left_seq IS NOT NULL"),
    (
        "ix_view_entries_left_actions",
        "(conversation_id, llm_response_id) WHERE left_seq IS NOT NULL AND role = 'action'",
    ),
)


def upgrade() -> None:
    online_index.create(op.get_bind(), "view_entries", INDEXES)


def downgrade() -> None:
    for name, _ in INDEXES:
        op.drop_index(name, table_name="view_entries")
