"""The server-side append takes its rows as one JSON document.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24

``viewstore_append_rows`` writes what ``viewstore_append`` (revision 0011) writes, but its
rows arrive as one ``jsonb`` argument, ``{"e": events, "v": view rows, "i": new indices,
"c": closed indices}``, each a list of objects keyed by column name, instead of one array per
column. The client then encodes one string (the standard library's C encoder) instead of
thirty arrays element by element, which was a quarter of the whole append; the server
parses the document once. Events take the append's time, ``p_updated_at``, as their
``recorded_at``, as both fast paths already did. Indices are closed one statement each, by
both key columns: a join of the table to the closed list would read every open index of the
conversation, a cost that grows with the view.

``viewstore_append`` stays: a process still running an older viewstore keeps calling it while
a rolling upgrade goes on. Each statement names the conversation (``p_key``), so the new
function too can be a Citus co-located distributed function.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# Frozen here, as migrations freeze table shapes: the argument types after the name.
SIGNATURE = (
    "text, bigint, text, "
    "bigint, boolean, integer, text, boolean, boolean, text, text, timestamptz, jsonb"
)
_FUNCTION = """
CREATE FUNCTION viewstore_append_rows(
    p_key text, p_old_version bigint, p_old_hash text,
    p_version bigint, p_unhandled boolean, p_view_length integer, p_pending text,
    p_in_tool_loop boolean, p_last_is_action boolean, p_last_batch text, p_last_hash text,
    p_updated_at timestamptz, p_rows jsonb
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    closed record;
BEGIN
    UPDATE conversations SET
        version = p_version, unhandled_request = p_unhandled, view_length = p_view_length,
        pending_tool_calls = p_pending, in_tool_loop = p_in_tool_loop,
        last_is_action = p_last_is_action, last_batch = p_last_batch,
        last_hash = p_last_hash, updated_at = p_updated_at
    WHERE id = p_key AND version = p_old_version AND last_hash = p_old_hash;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO events (conversation_id, seq, event_id, kind, source, timestamp, parent_id,
                        payload, hash, recorded_at)
    SELECT p_key, x.seq, x.event_id, x.kind, x.source, x.timestamp, x.parent_id, x.payload,
           x.hash, p_updated_at
    FROM jsonb_to_recordset(p_rows -> 'e') AS x(
        seq bigint, event_id text, kind text, source text, timestamp text, parent_id text,
        payload text, hash text);
    INSERT INTO view_entries (conversation_id, order_key, event_id, seq, kind, role,
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
    INSERT INTO manipulation_indices (conversation_id, position, from_seq, to_seq)
    SELECT p_key, x.position, x.from_seq, x.to_seq
    FROM jsonb_to_recordset(p_rows -> 'i') AS x(position integer, from_seq bigint,
                                                 to_seq bigint);
    FOR closed IN SELECT * FROM jsonb_to_recordset(p_rows -> 'c')
                               AS x(position integer, to_seq bigint) LOOP
        UPDATE manipulation_indices SET to_seq = closed.to_seq
        WHERE conversation_id = p_key AND position = closed.position AND to_seq IS NULL;
    END LOOP;
    RETURN true;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS viewstore_append_rows({SIGNATURE})")
