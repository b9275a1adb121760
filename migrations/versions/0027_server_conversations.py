"""What a store-backed agent server keeps of a conversation: its metadata and its runner lease.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28

An ``openhands-agent-server`` started on the store (docs/agent-servers.md) keeps no files: the
events and base state already have their tables, and ``server_conversations`` holds the rest,
one row per conversation. ``meta`` is the server's ``meta.json`` (its ``StoredConversation``:
workspace, title, tags, ...) as the server wrote it. ``runner``, ``generation`` and
``lease_expires_at`` are the lease of the one server that may run the conversation: claimed,
renewed and released by that server, taken over by another once it expires, ``generation``
counting the holders so a stale one is fenced off. ``created_at`` and ``updated_at`` are the
server's own times of the conversation, indexed with the id for its keyset-paged listing.

Not part of the audit trail (a server rewrites it). On a hash-partitioned store it is
partitioned as the log is. PostgreSQL: the writer role may read, insert, update and delete it
(a server deleting a conversation forgets its row, never its events), the reader role read it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

_GRANTS = """
    DECLARE
        reader text := 'viewstore_reader_' || current_database();
        writer text := 'viewstore_writer_' || current_database();
    BEGIN
        IF octet_length(reader) > 63 THEN
            reader := 'viewstore_reader_' || md5(current_database());
            writer := 'viewstore_writer_' || md5(current_database());
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = reader) THEN
            EXECUTE format('GRANT SELECT ON server_conversations TO %I', reader);
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = writer) THEN
            EXECUTE format(
                'GRANT SELECT, INSERT, UPDATE, DELETE ON server_conversations TO %I', writer
            );
        END IF;
    END
"""


def _partitions() -> int:
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
        "server_conversations",
        sa.Column("conversation_id", sa.String(255), nullable=False),
        sa.Column("meta", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("runner", sa.String(255), nullable=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_server_conversations"),
        **options,
    )
    for i in range(partitions):
        op.execute(
            f"CREATE TABLE server_conversations_p{i} PARTITION OF server_conversations "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
        )
    for order in ("created_at", "updated_at"):
        op.create_index(
            f"ix_server_conversations_{order}_conversation_id",  # the models' naming convention
            "server_conversations",
            [order, "conversation_id"],
        )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DO $$ {_GRANTS} $$")


def downgrade() -> None:
    op.drop_table("server_conversations")
