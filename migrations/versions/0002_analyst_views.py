"""SQL views for analysts: attention_window, condensation_log, view_history; on PostgreSQL a
read-only role ``viewstore_reader`` (NOLOGIN) that may SELECT them.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

The views read the tables written by the store; they hold no data of their own. ``payload`` is
the event's JSON: ``json`` on PostgreSQL, JSON text on SQLite; ``payload ->> 'field'`` works on
both. A summary row (inserted by a condensation) shows its synthesized summary event.
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

READER_ROLE = "viewstore_reader"
VIEWS = ("attention_window", "condensation_log", "view_history")


def _payload(expression: str) -> str:
    if op.get_bind().dialect.name == "postgresql":
        return f"CAST({expression} AS json)"
    return expression


def upgrade() -> None:
    payload = _payload("COALESCE(v.summary_payload, e.payload)")
    op.execute(
        f"""
        CREATE VIEW attention_window AS
        SELECT v.conversation_id,
               ROW_NUMBER() OVER (PARTITION BY v.conversation_id ORDER BY v.order_key) - 1
                   AS position,
               v.event_id,
               v.kind,
               e.source,
               e.timestamp,
               {payload} AS payload,
               v.seq
        FROM view_entries v
        JOIN events e ON e.conversation_id = v.conversation_id AND e.seq = v.seq
        WHERE v.left_seq IS NULL
        """
    )
    op.execute(
        """
        CREATE VIEW condensation_log AS
        SELECT c.conversation_id,
               c.seq AS condensation_seq,
               c.event_id AS condensation_event_id,
               c.summary,
               c.summary_offset,
               f.event_id AS forgotten_event_id,
               f.was_in_view,
               fe.seq AS forgotten_seq,
               fe.kind AS forgotten_kind
        FROM condensations c
        LEFT JOIN condensation_forgotten f
               ON f.conversation_id = c.conversation_id AND f.seq = c.seq
        LEFT JOIN events fe
               ON fe.conversation_id = f.conversation_id AND fe.event_id = f.event_id
        """
    )
    op.execute(
        f"""
        CREATE VIEW view_history AS
        SELECT v.conversation_id,
               v.order_key,
               v.event_id,
               v.kind,
               v.seq,
               v.entered_seq,
               v.left_seq,
               e.source,
               e.timestamp,
               {payload} AS payload
        FROM view_entries v
        JOIN events e ON e.conversation_id = v.conversation_id AND e.seq = v.seq
        """
    )
    if op.get_bind().dialect.name == "postgresql":
        _create_reader_role()


def _create_reader_role() -> None:
    """Create ``viewstore_reader`` unless it exists (roles are cluster-wide) and let it read
    the views, and nothing else. Without the right to create roles, the grant is skipped."""
    views = ", ".join(VIEWS)
    op.execute(
        f"""
        DO $$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER_ROLE}') THEN
                BEGIN
                    CREATE ROLE {READER_ROLE} NOLOGIN;
                EXCEPTION
                    WHEN duplicate_object OR unique_violation THEN NULL;
                    WHEN insufficient_privilege THEN
                        RAISE NOTICE 'viewstore: no privilege to create role {READER_ROLE}; '
                            'create it and re-run the grants in the README';
                        RETURN;
                END;
            END IF;
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO {READER_ROLE}', current_schema());
            GRANT SELECT ON {views} TO {READER_ROLE};
        END $$
        """
    )


def downgrade() -> None:
    # Dropping a view drops its grants; the role itself is cluster-wide and is kept.
    for view in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {view}")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"""
            DO $$
            BEGIN
                IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER_ROLE}') THEN
                    EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM {READER_ROLE}',
                                   current_schema());
                END IF;
            END $$
            """
        )
