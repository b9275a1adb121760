"""Alembic environment for viewstore.

Two ways in: the ``alembic`` command line (URL from ``VIEWSTORE_URL``), and
``EventStore.create_schema()``, which hands over an open connection in
``config.attributes["connection"]`` so the migration runs inside the store's own engine setup.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from viewstore.store.engine import WRITE, create_engine_for, default_url
from viewstore.store.revisions import migration_lock
from viewstore.store.schema import compared_on, metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=compared_on(connection.dialect.name),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine_for(default_url())
    try:
        # The same lock create_schema() takes, so the command line and stores starting up
        # never migrate one database at the same time.
        with engine.execution_options(**WRITE).connect() as conn:
            migration_lock(conn)
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("viewstore migrations run online only (they create triggers per dialect)")
run_migrations_online()
