"""The fast append as one server-side function on PostgreSQL.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24

``viewstore_append`` does what the fast path's single statement does
(``viewstore/store/append/fast_path.py``): it compare-and-sets the conversation row, then inserts the
new events, view rows and index rows and closes the indices that stopped holding. Every row
arrives as one array per column. A PL/pgSQL function keeps the plans of its statements, so the
server parses and plans them once per session. Each statement names the conversation, so on a
server that shards by conversation the function can run where the conversation lives (Citus:
``create_distributed_function('viewstore_append(...)', 'p_key', colocate_with =>
'conversations')``).

It returns false, having written nothing, when the row is not at the expected version and
hash. A stored event id raises the unique violation, and the caller's statement, the call,
then writes nothing. It runs with its caller's rights: the writer role may call it and can do
through it only what it may do anyway. SQLite has no functions of this kind; nothing changes
there.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# Frozen here: the columns of revision 0010's tables, as migrations freeze table shapes.
SIGNATURE = (
    "text, bigint, text, "
    "bigint, boolean, integer, text, boolean, boolean, text, text, timestamptz, "
    "bigint[], text[], text[], text[], text[], text[], text[], text[], timestamptz[], "
    "text[], text[], bigint[], text[], text[], text[], text[], boolean[], bigint[], bigint[], "
    "text[], text[], text[], text[], boolean[], text[], "
    "integer[], bigint[], bigint[], "
    "integer[], bigint[]"
)
_FUNCTION = """
CREATE FUNCTION viewstore_append(
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
LANGUAGE plpgsql AS $$
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
    SELECT p_key, x.* FROM unnest(e_seq, e_event_id, e_kind, e_source, e_timestamp,
                                  e_parent_id, e_payload, e_hash, e_recorded_at) AS x;
    IF cardinality(v_order_key) > 0 THEN
        INSERT INTO view_entries (conversation_id, order_key, event_id, seq, kind, role,
                                  tool_call_id, llm_response_id, thinking, entered_seq,
                                  left_seq, payload, source, timestamp, parent_id,
                                  is_summary, envelope)
        SELECT p_key, x.* FROM unnest(v_order_key, v_event_id, v_seq, v_kind, v_role,
                                      v_tool_call_id, v_llm_response_id, v_thinking,
                                      v_entered_seq, v_left_seq, v_payload, v_source,
                                      v_timestamp, v_parent_id, v_is_summary, v_envelope) AS x;
    END IF;
    IF cardinality(i_position) > 0 THEN
        INSERT INTO manipulation_indices (conversation_id, position, from_seq, to_seq)
        SELECT p_key, x.* FROM unnest(i_position, i_from_seq, i_to_seq) AS x;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(c_position), 0) LOOP
        UPDATE manipulation_indices SET to_seq = c_to_seq[i]
        WHERE conversation_id = p_key AND position = c_position[i] AND to_seq IS NULL;
    END LOOP;
    RETURN true;
END $$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS viewstore_append({SIGNATURE})")
