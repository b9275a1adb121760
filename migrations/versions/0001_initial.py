"""Initial schema: conversations, the append-only event log, condensations, view rows.

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Table shapes are frozen here on purpose (never import the live models into a migration).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.String(512)
CONVERSATION_ID = sa.String(255)
ORDER_KEY = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")

APPEND_ONLY_MESSAGE = "viewstore: the events table is append-only"


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", CONVERSATION_ID, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("unhandled_request", sa.Boolean(), nullable=False),
        sa.Column("view_length", sa.Integer(), nullable=False),
        sa.Column("pending_tool_calls", sa.Text(), nullable=False),
        sa.Column("in_tool_loop", sa.Boolean(), nullable=False),
        sa.Column("last_is_action", sa.Boolean(), nullable=False),
        sa.Column("last_batch", sa.Text(), nullable=True),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    op.create_table(
        "events",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("kind", sa.String(255), nullable=False),
        sa.Column("source", sa.String(255), nullable=True),
        sa.Column("timestamp", sa.String(64), nullable=True),
        sa.Column("parent_id", ID, nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "seq", name="pk_events"),
        sa.UniqueConstraint(
            "conversation_id", "event_id", name="uq_events_conversation_id_event_id"
        ),
        sa.UniqueConstraint("position", name="uq_events_position"),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_events_conversation_id_conversations",
        ),
    )
    op.create_index("ix_events_event_id", "events", ["event_id"])
    op.create_index(
        "ix_events_conversation_id_kind_seq", "events", ["conversation_id", "kind", "seq"]
    )
    op.create_index("ix_events_txid_position", "events", ["txid", "position"])
    op.create_table(
        "condensations",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("summary_offset", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "seq", name="pk_condensations"),
        sa.ForeignKeyConstraint(
            ["conversation_id", "seq"],
            ["events.conversation_id", "events.seq"],
            name="fk_condensations_conversation_id_seq_events",
        ),
    )
    op.create_table(
        "condensation_forgotten",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("was_in_view", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint(
            "conversation_id", "seq", "event_id", name="pk_condensation_forgotten"
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id", "seq"],
            ["condensations.conversation_id", "condensations.seq"],
            name="fk_condensation_forgotten_conversation_id_seq_condensations",
        ),
    )
    op.create_index(
        "ix_condensation_forgotten_conversation_id_event_id",
        "condensation_forgotten",
        ["conversation_id", "event_id"],
    )
    op.create_table(
        "view_entries",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("order_key", ORDER_KEY, nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("llm_response_id", sa.Text(), nullable=True),
        sa.Column("thinking", sa.Boolean(), nullable=False),
        sa.Column("entered_seq", sa.BigInteger(), nullable=False),
        sa.Column("left_seq", sa.BigInteger(), nullable=True),
        sa.Column("summary_payload", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "order_key", name="pk_view_entries"),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_view_entries_conversation_id_conversations",
        ),
    )
    op.create_index(
        "ix_view_entries_current",
        "view_entries",
        ["conversation_id", "order_key"],
        postgresql_where=sa.text("left_seq IS NULL"),
        sqlite_where=sa.text("left_seq IS NULL"),
    )
    op.create_table(
        "manipulation_indices",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("from_seq", sa.BigInteger(), nullable=False),
        sa.Column("to_seq", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint(
            "conversation_id", "position", "from_seq", name="pk_manipulation_indices"
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name="fk_manipulation_indices_conversation_id_conversations",
        ),
    )
    op.create_index(
        "ix_manipulation_indices_current",
        "manipulation_indices",
        ["conversation_id", "position"],
        postgresql_where=sa.text("to_seq IS NULL"),
        sqlite_where=sa.text("to_seq IS NULL"),
    )
    _create_guards()


def _create_guards() -> None:
    """Make the log append-only in the database itself, not only in our code."""
    if op.get_bind().dialect.name == "postgresql":
        # Feed columns filled by the database itself at insert (viewstore.store.append.rows).
        op.execute("CREATE SEQUENCE IF NOT EXISTS events_position_seq")
        op.execute(
            "ALTER TABLE events "
            "ALTER COLUMN position SET DEFAULT nextval('events_position_seq'), "
            "ALTER COLUMN txid SET DEFAULT (pg_current_xact_id()::text::bigint)"
        )
        op.execute(
            f"""
            CREATE FUNCTION viewstore_events_append_only() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}' USING ERRCODE = 'restrict_violation';
            END $$
            """
        )
        op.execute(
            "CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events "
            "FOR EACH ROW EXECUTE FUNCTION viewstore_events_append_only()"
        )
        op.execute(
            "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
            "FOR EACH STATEMENT EXECUTE FUNCTION viewstore_events_append_only()"
        )
    else:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER events_append_only_{action.lower()} BEFORE {action} ON events "
                f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
            )


def _drop_guards() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_no_truncate ON events")
        op.execute("DROP TRIGGER IF EXISTS events_append_only ON events")
        op.execute("DROP FUNCTION IF EXISTS viewstore_events_append_only()")
        op.execute("ALTER TABLE events ALTER COLUMN position DROP DEFAULT")
        op.execute("ALTER TABLE events ALTER COLUMN txid DROP DEFAULT")
        op.execute("DROP SEQUENCE IF EXISTS events_position_seq")
    else:
        op.execute("DROP TRIGGER IF EXISTS events_append_only_update")
        op.execute("DROP TRIGGER IF EXISTS events_append_only_delete")


def downgrade() -> None:
    _drop_guards()
    op.drop_table("manipulation_indices")
    op.drop_table("view_entries")
    op.drop_table("condensation_forgotten")
    op.drop_table("condensations")
    op.drop_table("events")
    op.drop_table("conversations")
