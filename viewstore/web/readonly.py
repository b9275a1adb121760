"""A store that cannot write: the database refuses every write on the viewer's connections.

SQLite connections are opened with ``PRAGMA query_only``; PostgreSQL sessions start with
``default_transaction_read_only``. The viewer only calls EventStore's reads, and this makes
that true by construction, not by care.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, event

from viewstore.store import EventStore, create_engine_for, normalize_url


def read_only_engine(url: str, schema: str | None = None) -> Engine:
    if normalize_url(url).get_backend_name() == "postgresql":
        return create_engine_for(
            url, schema=schema, connect_args={"options": "-c default_transaction_read_only=on"}
        )
    engine = create_engine_for(url, schema=schema)

    # Registered after the store's own connect hook, which sets the journal mode first.
    @event.listens_for(engine, "connect")
    def _query_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA query_only = ON")
        finally:
            cursor.close()

    return engine


def read_only_store(url: str, schema: str | None = None) -> EventStore:
    return EventStore(read_only_engine(url, schema), schema=schema)


#: The tables the viewer reads. On PostgreSQL the database's reader role
#: (``viewstore_reader_<database>``) may select them, and nothing else.
VIEWER_TABLES = (
    "conversations",
    "catalogue_sizes",
    "events",
    "view_entries",
    "manipulation_indices",
    "condensations",
    "condensation_forgotten",
)
