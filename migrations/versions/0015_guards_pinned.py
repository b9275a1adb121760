"""Guards pinned: fork links set once, every guard's names qualified and search_path set.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

A conversation's identity, creation time and fork links (``id``, ``created_at``,
``forked_from``, ``fork_seq``, ``family_id``) are written once, by the INSERT of ``fork()`` or
of a first append; nothing of the store updates them (appends, rebuild and the fork's own
state write the carried state and ``updated_at`` only, erasure deletes the row). Left
writable, the writer role could mark any conversation as a fork of a victim, and the owner's
erasure of the victim would then be refused; or backdate a conversation, which no log entry
contradicts (a fork is created after its first events). A trigger on ``conversations`` now
refuses an UPDATE that changes any of them, whoever runs it.

PostgreSQL resolves an unqualified table name in a function by the caller's ``search_path``,
and a session's temporary schema comes first unless it is named last: a temporary table
``tombstones`` (or ``redactions``) with a matching row let a DELETE (an UPDATE) of log rows
through the log's guard. Every viewstore function is recreated here with each table named in
the schema the store lives in (``current_schema()`` now, quoted) and its ``search_path``
pinned to that schema, then ``pg_temp`` explicitly last. The bodies are otherwise those of
revisions 0011, 0013 and 0014. SQLite needs no change there: a trigger of the ``main`` schema
resolves its tables in ``main`` whatever ``temp`` holds, and a qualified ``main.`` name would
make the file unreadable when attached under another name (tests/ops/test_tamper_roles.py).
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# Frozen here, as migrations freeze table shapes and their SQL.
APPEND_ONLY_MESSAGE = "viewstore: the events table is append-only"
TOMBSTONES_MESSAGE = "viewstore: the tombstones table is append-only"
REDACTIONS_MESSAGE = "viewstore: the redactions table is append-only"
SET_ONCE_MESSAGE = (
    "viewstore: the id, created_at and fork links (forked_from, fork_seq, family_id) of a "
    "conversation are set once, when it is created"
)
SET_ONCE = ("id", "created_at", "forked_from", "fork_seq", "family_id")
_PG_CHANGED = " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in SET_ONCE)
_SQLITE_CHANGED = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in SET_ONCE)
# The events guard of revision 0013: everything of a row but its payload is kept.
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
# Each function as revisions 0011-0014 wrote it, with ``{s}`` where a schema may qualify a name
# and ``{pin}`` where the search_path may be set; ``_render`` fills both or neither.
_EVENTS_GUARD = f"""
CREATE OR REPLACE FUNCTION {{s}}viewstore_events_append_only() RETURNS trigger
LANGUAGE plpgsql {{pin}}AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM {{s}}tombstones WHERE conversation_id = OLD.conversation_id) THEN
            RETURN OLD;  -- erased (EventStore.erase): its tombstone is written first
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF {_PG_KEPT} AND EXISTS (
            SELECT 1 FROM {{s}}redactions
            WHERE conversation_id = NEW.conversation_id AND seq = NEW.seq
            AND redacted_digest = encode(sha256(convert_to(NEW.payload, 'UTF8')), 'hex')
        ) THEN
            RETURN NEW;  -- redacted (EventStore.redact): its record is written first
        END IF;
    END IF;
    RAISE EXCEPTION '{APPEND_ONLY_MESSAGE}' USING ERRCODE = 'restrict_violation';
END $$
"""
_TOMBSTONES_GUARD = f"""
CREATE OR REPLACE FUNCTION {{s}}viewstore_tombstones_append_only() RETURNS trigger
LANGUAGE plpgsql {{pin}}AS $$
BEGIN
    RAISE EXCEPTION '{TOMBSTONES_MESSAGE}' USING ERRCODE = 'restrict_violation';
END $$
"""
_REDACTIONS_GUARD = f"""
CREATE OR REPLACE FUNCTION {{s}}viewstore_redactions_append_only() RETURNS trigger
LANGUAGE plpgsql {{pin}}AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT 1 FROM {{s}}tombstones WHERE conversation_id = OLD.conversation_id) THEN
            RETURN OLD;
        END IF;
    END IF;
    RAISE EXCEPTION '{REDACTIONS_MESSAGE}' USING ERRCODE = 'restrict_violation';
END $$
"""
_APPEND = """
CREATE OR REPLACE FUNCTION {s}viewstore_append(
    p_key text, p_old_version bigint, p_old_hash text,
    p_version bigint, p_unhandled boolean, p_view_length integer, p_pending text,
    p_in_tool_loop boolean, p_last_is_action boolean, p_last_batch text, p_last_hash text,
    p_updated_at timestamptz,
    e_seq bigint[], e_event_id text[], e_kind text[], e_source text[], e_timestamp text[],
    e_parent_id text[], e_payload text[], e_hash text[], e_recorded_at timestamptz[],
    v_order_key text[], v_event_id text[], v_seq bigint[], v_kind text[], v_role text[],
    v_tool_call_id text[], v_llm_response_id text[], v_thinking boolean[],
    v_entered_seq bigint[], v_left_seq bigint[], v_payload text[], v_source text[],
    v_timestamp text[], v_parent_id text[], v_is_summary boolean[], v_envelope text[],
    i_position integer[], i_from_seq bigint[], i_to_seq bigint[],
    c_position integer[], c_to_seq bigint[]
) RETURNS boolean
LANGUAGE plpgsql {pin}AS $$
BEGIN
    UPDATE {s}conversations SET
        version = p_version, unhandled_request = p_unhandled, view_length = p_view_length,
        pending_tool_calls = p_pending, in_tool_loop = p_in_tool_loop,
        last_is_action = p_last_is_action, last_batch = p_last_batch,
        last_hash = p_last_hash, updated_at = p_updated_at
    WHERE id = p_key AND version = p_old_version AND last_hash = p_old_hash;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO {s}events (conversation_id, seq, event_id, kind, source, timestamp, parent_id,
                        payload, hash, recorded_at)
    SELECT p_key, x.* FROM unnest(e_seq, e_event_id, e_kind, e_source, e_timestamp,
                                  e_parent_id, e_payload, e_hash, e_recorded_at) AS x;
    IF cardinality(v_order_key) > 0 THEN
        INSERT INTO {s}view_entries (conversation_id, order_key, event_id, seq, kind, role,
                                  tool_call_id, llm_response_id, thinking, entered_seq,
                                  left_seq, payload, source, timestamp, parent_id,
                                  is_summary, envelope)
        SELECT p_key, x.* FROM unnest(v_order_key, v_event_id, v_seq, v_kind, v_role,
                                      v_tool_call_id, v_llm_response_id, v_thinking,
                                      v_entered_seq, v_left_seq, v_payload, v_source,
                                      v_timestamp, v_parent_id, v_is_summary, v_envelope) AS x;
    END IF;
    IF cardinality(i_position) > 0 THEN
        INSERT INTO {s}manipulation_indices (conversation_id, position, from_seq, to_seq)
        SELECT p_key, x.* FROM unnest(i_position, i_from_seq, i_to_seq) AS x;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(c_position), 0) LOOP
        UPDATE {s}manipulation_indices SET to_seq = c_to_seq[i]
        WHERE conversation_id = p_key AND position = c_position[i] AND to_seq IS NULL;
    END LOOP;
    RETURN true;
END $$
"""
_APPEND_ROWS = """
CREATE OR REPLACE FUNCTION {s}viewstore_append_rows(
    p_key text, p_old_version bigint, p_old_hash text,
    p_version bigint, p_unhandled boolean, p_view_length integer, p_pending text,
    p_in_tool_loop boolean, p_last_is_action boolean, p_last_batch text, p_last_hash text,
    p_updated_at timestamptz, p_rows jsonb
) RETURNS boolean
LANGUAGE plpgsql {pin}AS $$
DECLARE
    closed record;
BEGIN
    UPDATE {s}conversations SET
        version = p_version, unhandled_request = p_unhandled, view_length = p_view_length,
        pending_tool_calls = p_pending, in_tool_loop = p_in_tool_loop,
        last_is_action = p_last_is_action, last_batch = p_last_batch,
        last_hash = p_last_hash, updated_at = p_updated_at
    WHERE id = p_key AND version = p_old_version AND last_hash = p_old_hash;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO {s}events (conversation_id, seq, event_id, kind, source, timestamp, parent_id,
                        payload, hash, recorded_at)
    SELECT p_key, x.seq, x.event_id, x.kind, x.source, x.timestamp, x.parent_id, x.payload,
           x.hash, p_updated_at
    FROM jsonb_to_recordset(p_rows -> 'e') AS x(
        seq bigint, event_id text, kind text, source text, timestamp text, parent_id text,
        payload text, hash text);
    INSERT INTO {s}view_entries (conversation_id, order_key, event_id, seq, kind, role,
                              tool_call_id, llm_response_id, thinking, entered_seq,
                              left_seq, payload, source, timestamp, parent_id,
                              is_summary, envelope)
    SELECT p_key, x.order_key, x.event_id, x.seq, x.kind, x.role, x.tool_call_id,
           x.llm_response_id, x.thinking, x.entered_seq, x.left_seq, x.payload, x.source,
           x.timestamp, x.parent_id, x.is_summary, x.envelope
    FROM jsonb_to_recordset(p_rows -> 'v') AS x(
        order_key text, event_id text, seq bigint, kind text, role text, tool_call_id text,
        llm_response_id text, thinking boolean, entered_seq bigint, left_seq bigint,
        payload text, source text, timestamp text, parent_id text, is_summary boolean,
        envelope text);
    INSERT INTO {s}manipulation_indices (conversation_id, position, from_seq, to_seq)
    SELECT p_key, x.position, x.from_seq, x.to_seq
    FROM jsonb_to_recordset(p_rows -> 'i') AS x(position integer, from_seq bigint,
                                                 to_seq bigint);
    FOR closed IN SELECT * FROM jsonb_to_recordset(p_rows -> 'c')
                               AS x(position integer, to_seq bigint) LOOP
        UPDATE {s}manipulation_indices SET to_seq = closed.to_seq
        WHERE conversation_id = p_key AND position = closed.position AND to_seq IS NULL;
    END LOOP;
    RETURN true;
END $$
"""
_FUNCTIONS = (_EVENTS_GUARD, _TOMBSTONES_GUARD, _REDACTIONS_GUARD, _APPEND, _APPEND_ROWS)
_SET_ONCE_GUARD = f"""
CREATE FUNCTION {{s}}viewstore_conversations_set_once() RETURNS trigger
LANGUAGE plpgsql {{pin}}AS $$
BEGIN
    RAISE EXCEPTION '{SET_ONCE_MESSAGE}' USING ERRCODE = 'restrict_violation';
END $$
"""
# The condition lives on the trigger, not in the function: the row is updated by every append,
# and a WHEN that holds false costs no function call.
_SET_ONCE_TRIGGER = (
    "CREATE TRIGGER conversations_set_once BEFORE UPDATE ON {s}conversations "
    f"FOR EACH ROW WHEN ({_PG_CHANGED}) "
    "EXECUTE FUNCTION {s}viewstore_conversations_set_once()"
)


def _render(statement: str, schema: str | None) -> str:
    """``statement`` with every name in ``schema`` (already quoted) and the search_path pinned
    to it, ``pg_temp`` last; with None, as the earlier revisions wrote it."""
    if schema is None:
        return statement.replace("{s}", "").replace("{pin}", "")
    pinned = f"SET search_path = {schema}, pg_temp "
    return statement.replace("{s}", f"{schema}.").replace("{pin}", pinned)


def _schema() -> str:
    found = op.get_bind().execute(text("SELECT quote_ident(current_schema())")).scalar_one()
    return str(found)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        schema = _schema()
        for function in (*_FUNCTIONS, _SET_ONCE_GUARD):
            op.execute(_render(function, schema))
        op.execute(_render(_SET_ONCE_TRIGGER, schema))
        return
    op.execute(
        "CREATE TRIGGER conversations_set_once BEFORE UPDATE ON conversations "
        f"WHEN {_SQLITE_CHANGED} "
        f"BEGIN SELECT RAISE(ABORT, '{SET_ONCE_MESSAGE}'); END"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        schema = _schema()
        op.execute(f"DROP TRIGGER IF EXISTS conversations_set_once ON {schema}.conversations")
        op.execute(f"DROP FUNCTION IF EXISTS {schema}.viewstore_conversations_set_once()")
        # CREATE OR REPLACE sets every attribute anew: the search_path goes with the old body.
        for function in _FUNCTIONS:
            op.execute(_render(function, None))
        return
    op.execute("DROP TRIGGER IF EXISTS conversations_set_once")
