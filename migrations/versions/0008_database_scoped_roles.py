"""Database-scoped roles on PostgreSQL: a reader and a writer of this database only.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

Roles belong to the whole server. Migration 0002 granted the analyst views to one role,
``viewstore_reader``, in every viewstore database, so a login in it could read them all. This
revision takes those grants back and creates, for this database alone (names as in
viewstore/store/database/roles.py):

- ``viewstore_reader_<database>``: SELECT on the analyst views, nothing else;
- ``viewstore_writer_<database>``: exactly what appends, reads, the feed and ``rebuild`` need
  (below), as a role that owns nothing, so it can neither alter a table, nor switch the
  append-only trigger off, nor replace the trigger's function: only the owner, which runs the
  migrations, can.

Both are NOLOGIN: give each worker or analyst a login in one of them. Without the right to
create roles the revision only takes the shared grants back and says so in a notice.
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

SHARED_READER = "viewstore_reader"
VIEWS = "attention_window, condensation_log, view_history"
# What the writer may do, table by table: the log and the condensation rows are only ever
# inserted; the conversation row is updated by every append (and locked FOR UPDATE, which needs
# UPDATE); the view and index rows are updated by appends and deleted by rebuild.
WRITER_GRANTS = {
    "conversations": "SELECT, INSERT, UPDATE",
    "events": "SELECT, INSERT",
    "condensations": "SELECT, INSERT",
    "condensation_forgotten": "SELECT, INSERT",
    "view_entries": "SELECT, INSERT, UPDATE, DELETE",
    "manipulation_indices": "SELECT, INSERT, UPDATE, DELETE",
    VIEWS: "SELECT",
}

# The role names, as viewstore.store.database.roles computes them (frozen here, like table shapes).
_NAMES = """
    db text := current_database();
    reader text := 'viewstore_reader_' || db;
    writer text := 'viewstore_writer_' || db;
    s text := current_schema();
"""
_LONG_NAMES = """
    IF octet_length(reader) > 63 THEN
        reader := 'viewstore_reader_' || md5(db);
        writer := 'viewstore_writer_' || md5(db);
    END IF;
"""


def _create(role: str) -> str:
    return f"""
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {role}) THEN
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', {role});
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL;  -- a concurrent migration
        END;
    END IF;
    """


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # create_schema() at head only reads the version table (whatever its name).
    version_table = op.get_context().version_table
    writer_grants = {**WRITER_GRANTS, f'"{version_table}"': "SELECT"}
    grants = "\n".join(
        f"    EXECUTE format('GRANT {privileges} ON {tables} TO %I', writer);"
        for tables, privileges in writer_grants.items()
    )
    op.execute(
        f"""
        DO $$
        DECLARE {_NAMES}
        BEGIN
            {_LONG_NAMES}
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{SHARED_READER}') THEN
                REVOKE SELECT ON {VIEWS} FROM {SHARED_READER};
                EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM {SHARED_READER}', s);
            END IF;
            BEGIN
                {_create("reader")}
                {_create("writer")}
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE NOTICE 'viewstore: no privilege to create roles % and %; a superuser '
                    'can create them and re-run the grants of migration 0008', reader, writer;
                RETURN;
            END;
            EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', db, reader, writer);
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I, %I', s, reader, writer);
            EXECUTE format('GRANT SELECT ON {VIEWS} TO %I', reader);
            {grants}
            EXECUTE format('GRANT USAGE ON SEQUENCE events_position_seq TO %I', writer);
        END $$
        """
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"""
        DO $$
        DECLARE {_NAMES}
            role text;
        BEGIN
            {_LONG_NAMES}
            FOREACH role IN ARRAY ARRAY[reader, writer] LOOP
                CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role);
                EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', s, role);
                EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I', s, role);
                EXECUTE format('REVOKE ALL ON SCHEMA %I FROM %I', s, role);
                EXECUTE format('REVOKE ALL ON DATABASE %I FROM %I', db, role);
                EXECUTE format('DROP ROLE %I', role);
            END LOOP;
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{SHARED_READER}') THEN
                EXECUTE format('GRANT USAGE ON SCHEMA %I TO {SHARED_READER}', s);
                GRANT SELECT ON {VIEWS} TO {SHARED_READER};
            END IF;
        END $$
        """
    )
