"""The database's reader role may read the tables the web viewer reads.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23

``viewstore serve`` runs as a login in ``viewstore_reader_<database>`` (migration 0008), which
could read only the analyst views. The viewer reads the log, the view and index rows and the
condensations themselves (the analyst views hold less), so the reader gains SELECT on exactly
those tables: nothing more, and still no write of any kind. The views already expose the same
payloads, so the role sees no data it could not see before. PostgreSQL only; a database whose
reader role could not be created (no privilege, see 0008) is left as it is.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Frozen here, as migrations freeze table shapes.
TABLES = (
    "conversations, events, view_entries, manipulation_indices, condensations, "
    "condensation_forgotten"
)
_READER = """
    DECLARE
        reader text := 'viewstore_reader_' || current_database();
    BEGIN
        IF octet_length(reader) > 63 THEN
            reader := 'viewstore_reader_' || md5(current_database());
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = reader) THEN
            EXECUTE format('{statement}', reader);
        END IF;
    END
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    statement = f"GRANT SELECT ON {TABLES} TO %I"
    op.execute(f"DO $$ {_READER.format(statement=statement)} $$")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    statement = f"REVOKE SELECT ON {TABLES} FROM %I"
    op.execute(f"DO $$ {_READER.format(statement=statement)} $$")
