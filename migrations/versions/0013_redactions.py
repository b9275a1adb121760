"""Redaction: an append-only record per removal, and the log's guard lets only that change.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24

``EventStore.redact`` replaces the content of one event (or of some JSON paths in it) and
keeps its envelope, so views and indices do not change (``viewstore/store/lifecycle/redaction.py``). A
row in ``redactions`` records each removal: who, when, why, which paths, the digests of the
payload before and after, the event's chain hash and the one before it, and a hash of the
record itself (keyed like the chain when the store has a chain key).

The guard on ``events`` now lets an update through only when it changes nothing but the
payload, and a redaction record of that event exists (on PostgreSQL: one whose digest is that
of the new payload). Every other update, any delete of a conversation without a tombstone, and
``TRUNCATE`` are refused as before. ``redactions`` is append-only like ``tombstones``; its rows
of an erased conversation go with it. The writer role may read it but not write it: only the
owner redacts (docs/threat-model.md).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

APPEND_ONLY_MESSAGE = "viewstore: the events table is append-only"
REDACTIONS_MESSAGE = "viewstore: the redactions table is append-only"
# Everything of a row but its payload: an update must leave all of it as it was.
_KEPT = (
    "conversation_id",
    "seq",
    "event_id",
    "kind",
    "source",
    "timestamp",
    "parent_id",
    "hash",
    "recorded_at",
    "position",
    "txid",
)
_PG_KEPT = " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in _KEPT)
_SQLITE_KEPT = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in _KEPT)
_GUARD = """
CREATE OR REPLACE FUNCTION viewstore_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM tombstones WHERE conversation_id = OLD.conversation_id) THEN
            RETURN OLD;  -- erased (EventStore.erase): its tombstone is written first
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF {kept} AND EXISTS (
            SELECT 1 FROM redactions
            WHERE conversation_id = NEW.conversation_id AND seq = NEW.seq
            AND redacted_digest = encode(sha256(convert_to(NEW.payload, 'UTF8')), 'hex')
        ) THEN
            RETURN NEW;  -- redacted (EventStore.redact): its record is written first
        END IF;
    END IF;
    RAISE EXCEPTION '{message}' USING ERRCODE = 'restrict_violation';
END $$
"""
_OLD_GUARD = """
CREATE OR REPLACE FUNCTION viewstore_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM tombstones WHERE conversation_id = OLD.conversation_id) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '{message}' USING ERRCODE = 'restrict_violation';
END $$
"""
_REDACTIONS_GUARD = f"""
CREATE FUNCTION viewstore_redactions_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM tombstones WHERE conversation_id = OLD.conversation_id) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '{REDACTIONS_MESSAGE}' USING ERRCODE = 'restrict_violation';
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
            EXECUTE format('{grant}', reader);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = writer) THEN
            EXECUTE format('{grant}', writer);
        END IF;
    END
"""


def upgrade() -> None:
    op.create_table(
        "redactions",
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(512), nullable=False),
        sa.Column("paths", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("redacted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("redacted_by", sa.String(255), nullable=True),
        sa.Column("previous_hash", sa.String(64), nullable=False),
        sa.Column("event_hash", sa.String(64), nullable=False),
        sa.Column("removed_digest", sa.String(64), nullable=False),
        sa.Column("redacted_digest", sa.String(64), nullable=False),
        sa.Column("record_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "seq", "round", name="pk_redactions"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_GUARD.format(kept=_PG_KEPT, message=APPEND_ONLY_MESSAGE))
        op.execute(_REDACTIONS_GUARD)
        op.execute(
            "CREATE TRIGGER redactions_append_only BEFORE UPDATE OR DELETE ON redactions "
            "FOR EACH ROW EXECUTE FUNCTION viewstore_redactions_append_only()"
        )
        op.execute(
            "CREATE TRIGGER redactions_no_truncate BEFORE TRUNCATE ON redactions "
            "FOR EACH STATEMENT EXECUTE FUNCTION viewstore_redactions_append_only()"
        )
        op.execute(f"DO $$ {_ROLES.format(grant='GRANT SELECT ON redactions TO %I')} $$")
        return
    op.execute("DROP TRIGGER IF EXISTS events_append_only_update")
    op.execute(
        "CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events "
        f"WHEN NOT ({_SQLITE_KEPT} AND EXISTS (SELECT 1 FROM redactions "
        "WHERE conversation_id = NEW.conversation_id AND seq = NEW.seq)) "
        f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
    )
    op.execute(
        "CREATE TRIGGER redactions_append_only_update BEFORE UPDATE ON redactions "
        f"BEGIN SELECT RAISE(ABORT, '{REDACTIONS_MESSAGE}'); END"
    )
    op.execute(
        "CREATE TRIGGER redactions_append_only_delete BEFORE DELETE ON redactions "
        "WHEN NOT EXISTS (SELECT 1 FROM tombstones WHERE conversation_id = OLD.conversation_id) "
        f"BEGIN SELECT RAISE(ABORT, '{REDACTIONS_MESSAGE}'); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DO $$ {_ROLES.format(grant='REVOKE ALL ON redactions FROM %I')} $$")
        op.execute("DROP TRIGGER IF EXISTS redactions_no_truncate ON redactions")
        op.execute("DROP TRIGGER IF EXISTS redactions_append_only ON redactions")
        op.execute("DROP FUNCTION IF EXISTS viewstore_redactions_append_only()")
        op.execute(_OLD_GUARD.format(message=APPEND_ONLY_MESSAGE))
    else:
        for action in ("update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS redactions_append_only_{action}")
        op.execute("DROP TRIGGER IF EXISTS events_append_only_update")
        op.execute(
            "CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events "
            f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}'); END"
        )
    op.drop_table("redactions")
