"""The one place where driver errors become viewstore errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, exc

from viewstore.errors import SchemaError, StorageError, ViewstoreError

_MISSING_TABLE_HINTS = ("no such table", "no such column", "undefinedtable", "does not exist")


def translate(error: exc.SQLAlchemyError) -> ViewstoreError:
    text = str(error).lower()
    if isinstance(error, exc.OperationalError | exc.ProgrammingError) and any(
        hint in text for hint in _MISSING_TABLE_HINTS
    ):
        return SchemaError(
            "the viewstore schema is missing or outdated: run store.create_schema() "
            "or `viewstore init`"
        )
    detail = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
    return StorageError(f"database error ({type(error).__name__}): {detail}")


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except exc.SQLAlchemyError as error:
        raise translate(error) from error


@contextmanager
def driver_errors(conn: Connection) -> Iterator[None]:
    """Around a statement run on the raw DBAPI cursor: its errors are wrapped as SQLAlchemy
    wraps its own, for ``translated()`` above, and a dropped connection is invalidated so the
    pool replaces it, as SQLAlchemy would have done."""
    dbapi = conn.dialect.loaded_dbapi
    try:
        yield
    except dbapi.Error as error:
        dropped = conn.dialect.is_disconnect(error, conn.connection.dbapi_connection, None)
        if dropped:
            conn.invalidate(error)
        raise exc.DBAPIError.instance(
            None, None, error, dbapi.Error, connection_invalidated=dropped, dialect=conn.dialect
        ) from error
