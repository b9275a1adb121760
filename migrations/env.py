"""Alembic environment for viewstore.

Two ways in: the ``alembic`` command line (URL from ``VIEWSTORE_URL``, PostgreSQL schema from
``VIEWSTORE_SCHEMA``), and ``EventStore.create_schema()``, which hands over an open connection
in ``config.attributes["connection"]`` (and the schema in ``config.attributes["schema"]``) so
the migration runs inside the store's own engine setup.

The revision is kept in viewstore's own version table, never in Alembic's default
``alembic_version``, which an application sharing the database may use for its own history
(viewstore.store.database.migrate).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection

from viewstore.store.database.engine import WRITE, create_engine_for, default_url
from viewstore.store.database.migrate import VERSION_TABLE
from viewstore.store.database.revisions import migration_lock
from viewstore.store.database.schema import compared_on, metadata


def _run(connection: Connection, schema: str | None) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=compared_on(connection.dialect.name),
        version_table=VERSION_TABLE,
        version_table_schema=schema,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection, context.config.attributes.get("schema"))
        return
    schema = os.environ.get("VIEWSTORE_SCHEMA") or None
    engine = create_engine_for(default_url(), schema=schema)
    try:
        # The same lock create_schema() takes, so the command line and stores starting up
        # never migrate one database at the same time.
        with engine.execution_options(**WRITE).connect() as conn:
            migration_lock(conn)
            if schema is not None:
                conn.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            _run(conn, schema)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("viewstore migrations run online only (they create triggers per dialect)")
run_migrations_online()
