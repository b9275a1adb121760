"""View rows carry a copy of their event: a view read is one scan of view_entries, no join.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

New columns on ``view_entries``: ``payload`` (the event's exact JSON; for a summary, the JSON
of the event its condensation synthesized, which used to be ``summary_payload``), ``source``,
``timestamp``, ``parent_id``, ``is_summary``, and ``envelope`` (the event id, U+001F, and the
fields a read rebuilds the event from as one JSON array; see viewstore.store.read.stored_events).
Existing rows are filled from the log. The analyst views read the copies instead of joining
the log.

The envelope's encoding is frozen here (never import the live code into a migration): it must
stay what ``viewstore.store.read.stored_events.envelope`` wrote at this revision.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

ID = sa.String(512)
READER_ROLE = "viewstore_reader"
JOINED_VIEWS = ("attention_window", "view_history")  # the views that read view_entries
BATCH = 1000  # rows per backfill round: bounded memory whatever the database's size

_CURRENT_INDEX = "ix_view_entries_current"


def _payload(expression: str) -> str:
    if op.get_bind().dialect.name == "postgresql":
        return f"CAST({expression} AS json)"
    return expression


def _drop_views() -> None:
    for view in JOINED_VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")


def _grant_views() -> None:
    """Dropping a view dropped its grants: give them back to the reader role, where 0002
    could create it."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"""
        DO $$
        BEGIN
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER_ROLE}') THEN
                GRANT SELECT ON {", ".join(JOINED_VIEWS)} TO {READER_ROLE};
            END IF;
        END $$
        """
    )


def _current_index(create: bool) -> None:
    # Rebuilt around the SQLite table copy below, so its partial predicate cannot get lost.
    if create:
        op.create_index(
            _CURRENT_INDEX,
            "view_entries",
            ["conversation_id", "order_key"],
            postgresql_where=sa.text("left_seq IS NULL"),
            sqlite_where=sa.text("left_seq IS NULL"),
        )
    else:
        op.drop_index(_CURRENT_INDEX, table_name="view_entries")


# -- upgrade ----------------------------------------------------------------------------------


def upgrade() -> None:
    _drop_views()
    _current_index(create=False)
    op.add_column("view_entries", sa.Column("payload", sa.Text(), nullable=True))
    op.add_column("view_entries", sa.Column("source", sa.String(255), nullable=True))
    op.add_column("view_entries", sa.Column("timestamp", sa.String(64), nullable=True))
    op.add_column("view_entries", sa.Column("parent_id", ID, nullable=True))
    op.add_column("view_entries", sa.Column("is_summary", sa.Boolean(), nullable=True))
    op.add_column("view_entries", sa.Column("envelope", sa.Text(), nullable=True))
    _backfill(op.get_bind())
    with op.batch_alter_table("view_entries") as batch:
        batch.alter_column("payload", existing_type=sa.Text(), nullable=False)
        batch.alter_column("is_summary", existing_type=sa.Boolean(), nullable=False)
        batch.alter_column("envelope", existing_type=sa.Text(), nullable=False)
        batch.drop_column("summary_payload")
    _current_index(create=True)
    op.execute(
        f"""
        CREATE VIEW attention_window AS
        SELECT conversation_id,
               ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY order_key) - 1
                   AS position,
               event_id,
               kind,
               source,
               timestamp,
               {_payload("payload")} AS payload,
               seq
        FROM view_entries
        WHERE left_seq IS NULL
        """
    )
    op.execute(
        f"""
        CREATE VIEW view_history AS
        SELECT conversation_id,
               order_key,
               event_id,
               kind,
               seq,
               entered_seq,
               left_seq,
               source,
               timestamp,
               {_payload("payload")} AS payload
        FROM view_entries
        """
    )
    _grant_views()


_ROWS_AFTER = sa.text(
    """
    SELECT v.conversation_id, v.order_key, v.event_id, v.kind, v.role, v.tool_call_id,
           v.llm_response_id, v.thinking, v.summary_payload,
           e.payload, e.source, e.timestamp, e.parent_id
    FROM view_entries v
    JOIN events e ON e.conversation_id = v.conversation_id AND e.seq = v.seq
    WHERE v.conversation_id = :c AND v.order_key > :k
    ORDER BY v.order_key
    LIMIT :n
    """
)
_FILL = sa.text(
    "UPDATE view_entries SET payload = :payload, source = :source, timestamp = :timestamp, "
    "parent_id = :parent_id, is_summary = :is_summary, envelope = :envelope "
    "WHERE conversation_id = :c AND order_key = :k"
).bindparams(sa.bindparam("is_summary", type_=sa.Boolean()))


def _backfill(conn: sa.Connection) -> None:
    """Copy each row's event from the log (a summary: from its synthesized JSON), one
    conversation and one batch of its rows, in key order, at a time.

    It takes no conversation lock, unlike rebuild: it copies values of the immutable log into
    rows that exist already, and never writes a version or carried state, so no append can be
    rolled back by it; the ADD COLUMNs above hold view_entries' exclusive lock until the
    migration commits, so appends that add view rows wait anyway. Taking the conversation row
    locks too (after that table lock) would deadlock with an append holding its row lock and
    waiting for view_entries."""
    for (conversation_id,) in conn.execute(sa.text("SELECT id FROM conversations")).all():
        after = ""
        while True:
            params = {"c": conversation_id, "k": after, "n": BATCH}
            found = conn.execute(_ROWS_AFTER, params).all()
            if not found:
                break
            conn.execute(_FILL, [_copies(row) for row in found])
            after = found[-1].order_key


def _copies(row: Any) -> dict[str, Any]:
    payload, source, timestamp, parent_id = row.payload, row.source, row.timestamp, row.parent_id
    if row.summary_payload is not None:  # the summary event has its own envelope fields
        summary = json.loads(row.summary_payload)
        payload, source = row.summary_payload, summary.get("source")
        timestamp, parent_id = summary.get("timestamp"), None
    fields = [
        row.kind,
        row.role,
        source,
        timestamp,
        parent_id,
        row.tool_call_id,
        row.llm_response_id,
        bool(row.thinking),
    ]
    packed = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return {
        "c": row.conversation_id,
        "k": row.order_key,
        "payload": payload,
        "source": source,
        "timestamp": timestamp,
        "parent_id": parent_id,
        "is_summary": row.summary_payload is not None,
        "envelope": f"{row.event_id}\x1f{packed}",
    }


# -- downgrade --------------------------------------------------------------------------------


def downgrade() -> None:
    _drop_views()
    _current_index(create=False)
    op.add_column("view_entries", sa.Column("summary_payload", sa.Text(), nullable=True))
    op.execute("UPDATE view_entries SET summary_payload = payload WHERE is_summary")
    with op.batch_alter_table("view_entries") as batch:
        for column in ("envelope", "is_summary", "parent_id", "timestamp", "source", "payload"):
            batch.drop_column(column)
    _current_index(create=True)
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
    _grant_views()
