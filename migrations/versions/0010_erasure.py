"""Erasure: a tombstone per erased conversation, and the log's guard lets only that go.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24

``EventStore.erase`` deletes a conversation's rows in one transaction and leaves a row in
``tombstones`` (event count, final chain hash, times, reason, who). The log stays append-only
in the database itself: its guard (the trigger on ``events``) now lets a row be deleted only
when its conversation has a tombstone, so only a recorded erasure removes events; updates and
``TRUNCATE`` are refused as before. ``tombstones`` is append-only in the same way.

On PostgreSQL the database's writer role (0008) gets no new privilege: it has no DELETE on
the log and may not write tombstones, so it cannot erase. The reader may read tombstones. The
writer also gains what ``base_states`` (0005, older than the roles) needs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# Frozen here, as migrations freeze table shapes.
APPEND_ONLY_MESSAGE = "viewstore: the events table is append-only"
TOMBSTONES_MESSAGE = "viewstore: the tombstones table is append-only"
_GUARD = """
CREATE OR REPLACE FUNCTION viewstore_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM tombstones WHERE conversation_id = OLD.conversation_id) THEN
            RETURN OLD;  -- erased (EventStore.erase): its tombstone is written first
        END IF;
    END IF;
    RAISE EXCEPTION '{message}' USING ERRCODE = 'restrict_violation';
END $$
"""
_OLD_GUARD = """
CREATE OR REPLACE FUNCTION viewstore_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '{message}' USING ERRCODE = 'restrict_violation';
END $$
"""
_ROLES = """
    DECLARE
        reader text := 'viewstore_reader_' || current_database();
        writer text := 'viewstore_writer_' || current_database();
    BEGIN
        IF octet_length(reader) > 63 THEN
            reader := 'viewstore_reader_' || md5(current_database());
            writer := 'viewstore_writer_' || md5(current_database());
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = reader) THEN
            EXECUTE format('{reader}', reader);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = writer) THEN
            EXECUTE format('{writer}', writer);
            EXECUTE format('{writer_base_states}', writer);
        END IF;
    END
"""


def upgrade() -> None:
    op.create_table(
        "tombstones",
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("erased_by", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_tombstones"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_GUARD.format(message=APPEND_ONLY_MESSAGE))
        op.execute(
            f"""
            CREATE FUNCTION viewstore_tombstones_append_only() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION '{TOMBSTONES_MESSAGE}' USING ERRCODE = 'restrict_violation';
            END $$
            """
        )
        op.execute(
            "CREATE TRIGGER tombstones_append_only BEFORE UPDATE OR DELETE ON tombstones "
            "FOR EACH ROW EXECUTE FUNCTION viewstore_tombstones_append_only()"
        )
        op.execute(
            "CREATE TRIGGER tombstones_no_truncate BEFORE TRUNCATE ON tombstones "
            "FOR EACH STATEMENT EXECUTE FUNCTION viewstore_tombstones_append_only()"
        )
        grants = _ROLES.format(
            reader="GRANT SELECT ON tombstones TO %I",
            writer="GRANT SELECT ON tombstones TO %I",
            writer_base_states="GRANT SELECT, INSERT, UPDATE ON base_states TO %I",
        )
        op.execute(f"DO $$ {grants} $$")
        return
    op.execute("DROP TRIGGER IF EXISTS events_append_only_delete")
    op.execute(
        "CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events "
        "WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE conversation_id = OLD.conversation_id) "
        f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
    )
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER tombstones_append_only_{action.lower()} BEFORE {action} "
            f"ON tombstones BEGIN SELECT RAISE(ABORT, '{TOMBSTONES_MESSAGE}'); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        revokes = _ROLES.format(
            reader="REVOKE ALL ON tombstones FROM %I",
            writer="REVOKE ALL ON tombstones FROM %I",
            writer_base_states="REVOKE ALL ON base_states FROM %I",
        )
        op.execute(f"DO $$ {revokes} $$")
        op.execute("DROP TRIGGER IF EXISTS tombstones_no_truncate ON tombstones")
        op.execute("DROP TRIGGER IF EXISTS tombstones_append_only ON tombstones")
        op.execute("DROP FUNCTION IF EXISTS viewstore_tombstones_append_only()")
        op.execute(_OLD_GUARD.format(message=APPEND_ONLY_MESSAGE))
    else:
        for action in ("update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS tombstones_append_only_{action}")
        op.execute("DROP TRIGGER IF EXISTS events_append_only_delete")
        op.execute(
            "CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
        )
    op.drop_table("tombstones")
