"""What an agent server says about a conversation, one row per conversation.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26

``viewstore ingest`` receives the agent servers' ``ConversationInfo`` posts and ``viewstore
sync`` reads the same from their REST API (docs/fleet.md). ``conversation_sources`` keeps, per
conversation, which agent server it came from (``source``, a name from the ingest's sources
file), its title, execution status, agent kind and LLM model, the server's own created and
updated times and its tags (a JSON object), and when the row was last written. Not part of
the audit trail: a later post overwrites it (an older one does not, by ``updated_at``). No
foreign key: the info may arrive before the conversation's first event.

On a hash-partitioned store (``viewstore init --partitions``) the table is partitioned as
the log is. PostgreSQL: the writer role may read, insert and update it, the reader role read it (the
viewer shows it), as migration 0008's roles; a database without them is left as it is.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

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
        END IF;
    END
"""


def _partitions() -> int:
    """How many hash partitions the store's log has (0: none), as partitions.py counts them."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return 0
    found = bind.exec_driver_sql(
        "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent "
        "WHERE c.oid = to_regclass('events')"
    ).scalar()
    return int(found or 0)


def upgrade() -> None:
    partitions = _partitions()
    options = {"postgresql_partition_by": "HASH (conversation_id)"} if partitions else {}
    op.create_table(
        "conversation_sources",
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("execution_status", sa.String(64), nullable=True),
        sa.Column("agent_kind", sa.String(255), nullable=True),
        sa.Column("llm_model", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("tags", sa.Text(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_conversation_sources"),
        **options,
    )
    for i in range(partitions):  # a partitioned store: partitioned as its other tables
        op.execute(
            f"CREATE TABLE conversation_sources_p{i} PARTITION OF conversation_sources "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
        )
    if op.get_bind().dialect.name == "postgresql":
        grants = _ROLES.format(
            reader="GRANT SELECT ON conversation_sources TO %I",
            writer="GRANT SELECT, INSERT, UPDATE ON conversation_sources TO %I",
        )
        op.execute(f"DO $$ {grants} $$")


def downgrade() -> None:
    op.drop_table("conversation_sources")
