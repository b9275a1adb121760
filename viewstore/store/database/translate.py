"""The one place where driver errors become viewstore errors.

Errors raised once a session exists carry a code: PostgreSQL's SQLSTATE, SQLite's result code.
They decide between *transient* failures (the same call may pass if simply run again: a lost
connection, a serialization failure, a deadlock, a lock wait that timed out, a busy SQLite
file) and the rest. A failure to connect carries no code (libpq reports it as text before any
session exists), so it is told apart by the wording of libpq and of the server: a missing
database, a refused login, an unreachable server, a server that is starting or stopping.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, exc

from viewstore.domain.errors import (
    AuthenticationError,
    DatabaseNotFoundError,
    SchemaError,
    ServerUnreachableError,
    StorageError,
    TransientStorageError,
    ViewstoreError,
)

# serialization failure, deadlock, lock wait timed out, the server shutting down or crashing
# (which ends the session), the server not accepting connections yet (or any more).
_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03", "57P01", "57P02", "57P03"})
_CONNECTION_EXCEPTION_CLASS = "08"
_UNDEFINED_OBJECT_SQLSTATES = frozenset({"42P01", "42703"})  # undefined table, column
_SQLITE_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_SQLITE_MISSING_HINTS = ("no such table", "no such column")

_SERVER = re.compile(
    r'connection to server (?:at "(?P<host>[^"]*)"(?: \([^)]*\))?, port (?P<port>\d+)'
    r'|on socket "(?P<socket>[^"]*)")'
)
_MISSING_DATABASE = re.compile(r'FATAL:\s+database "(?P<name>[^"]*)" does not exist')
_MISSING_ROLE = re.compile(r'FATAL:\s+role "(?P<name>[^"]*)" does not exist')
_REFUSED_LOGIN = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "pg_hba.conf rejects",
    "no password supplied",
    "authentication failed",
)
_UNREACHABLE = (
    "connection refused",
    "could not translate host name",
    "failed to resolve host",
    "name or service not known",
    "timeout expired",
    "connection timed out",
    "no route to host",
    "network is unreachable",
    "no such file or directory",  # a Unix socket that is not there: no server on it
)
_NOT_NOW = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    # The server went away in the middle of the handshake (it was stopping).
    "server closed the connection unexpectedly",
    "terminating connection due to administrator command",
    "connection reset by peer",
)


def translate(error: exc.SQLAlchemyError) -> ViewstoreError:
    orig = getattr(error, "orig", None)
    full = str(orig or error)
    detail = _first_line(full)
    if _is_transient(error, orig):
        return TransientStorageError(f"transient database error (retrying may succeed): {detail}")
    if orig is not None and getattr(orig, "sqlstate", "missing") is None:
        # A psycopg error without a SQLSTATE: no session was established.
        failure = _connection_failure(full)
        if failure is not None:
            return failure
    if _is_undefined_object(error, orig, full):
        return SchemaError(
            "the viewstore schema is missing or outdated: run store.create_schema() "
            "or `viewstore init`"
        )
    if _sqlite_code(orig) == sqlite3.SQLITE_CANTOPEN:
        return DatabaseNotFoundError(
            f"cannot open the SQLite database file ({detail}): its folder must exist and be "
            "writable"
        )
    return StorageError(f"database error ({type(error).__name__}): {detail}")


def translate_driver(error: Exception, *, lost: bool) -> ViewstoreError:
    """A raw driver error of a connection the store opened outside SQLAlchemy's pool (the
    change feed's listening connection, ``viewstore.store.feed.follow``); ``lost``: the driver
    says that connection is gone, which a retry on a new one may get past."""
    wrapped = exc.DBAPIError.instance(None, None, error, Exception, connection_invalidated=lost)
    return translate(wrapped)


def _is_transient(error: exc.SQLAlchemyError, orig: object) -> bool:
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True  # the driver said the connection is gone
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str) and (
        sqlstate in _TRANSIENT_SQLSTATES or sqlstate.startswith(_CONNECTION_EXCEPTION_CLASS)
    ):
        return True
    return _sqlite_code(orig) in _SQLITE_BUSY


def _sqlite_code(orig: object) -> int | None:
    """SQLite's primary result code: the extended code's low byte (SQLITE_BUSY_SNAPSHOT is a
    BUSY, SQLITE_CANTOPEN_ISDIR a CANTOPEN)."""
    code = getattr(orig, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _is_undefined_object(error: exc.SQLAlchemyError, orig: object, text: str) -> bool:
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate is not None:
        return sqlstate in _UNDEFINED_OBJECT_SQLSTATES
    lowered = text.lower()
    return isinstance(error, exc.OperationalError) and any(
        hint in lowered for hint in _SQLITE_MISSING_HINTS
    )


def _connection_failure(text: str) -> StorageError | None:
    """The cause of a failed connection attempt, or None when the wording is not known."""
    at = _server(text)
    lowered = text.lower()
    if (match := _MISSING_DATABASE.search(text)) is not None:
        name = match["name"]
        return DatabaseNotFoundError(
            f'database "{name}" does not exist on the server{at}: create it first '
            f"(`createdb {name}`); `viewstore init` then creates the schema in it"
        )
    if (match := _MISSING_ROLE.search(text)) is not None:
        return AuthenticationError(
            f'role "{match["name"]}" does not exist on the server{at}: check the user in the URL'
        )
    if any(hint in lowered for hint in _REFUSED_LOGIN):
        return AuthenticationError(
            f"the server{at} refused the login ({_cause(text)}): check the user and password "
            "in the URL"
        )
    if any(hint in lowered for hint in _NOT_NOW):
        return TransientStorageError(
            f"the server{at} is not accepting connections right now ({_cause(text)}); "
            "retrying may succeed"
        )
    if any(hint in lowered for hint in _UNREACHABLE):
        return ServerUnreachableError(f"cannot reach the database server{at}: {_cause(text)}")
    return None


def _server(text: str) -> str:
    match = _SERVER.search(text)
    if match is None:
        return ""
    if match["socket"] is not None:
        return f" on socket {match['socket']}"
    return f" at {match['host']}:{match['port']}"


def _cause(text: str) -> str:
    """The reason libpq or the server gave, without the "connection ... failed:" preamble."""
    reason = _first_line(text).rsplit(" failed: ", 1)[-1]
    return reason.removeprefix("FATAL:").strip()


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else text


_UNIQUE_VIOLATION = "23505"
# Citus relays a worker's unique violation as an internal error with PostgreSQL's message.
_RELAYED_UNIQUE = re.compile(r"duplicate key value violates unique constraint")


def is_unique_violation(sqlstate: str | None, message: str) -> bool:
    """Whether a server error is a unique-key violation, in any form a server sends one:
    SQLSTATE 23505, or (Citus, from a worker) XX000 carrying the same message."""
    if sqlstate == _UNIQUE_VIOLATION:
        return True
    return sqlstate == "XX000" and _RELAYED_UNIQUE.search(message) is not None


def unique_violation(error: BaseException) -> bool:
    """``is_unique_violation`` of a driver error (psycopg's carry their SQLSTATE)."""
    return is_unique_violation(getattr(error, "sqlstate", None), str(error))


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except exc.SQLAlchemyError as error:
        raise translate(error) from error


@contextmanager
def driver_errors(conn: Connection) -> Iterator[None]:
    """Around a statement run on the raw DBAPI cursor: its errors are wrapped as SQLAlchemy
    wraps its own, for ``translated()`` above.

    A dropped connection is invalidated, and so is every other connection of the pool: the
    usual cause is a server restart, which dropped them all, and each would otherwise fail
    once in turn (SQLAlchemy does the same for the statements it runs itself).
    """
    dbapi = conn.dialect.loaded_dbapi
    try:
        yield
    except dbapi.Error as error:
        dropped = conn.dialect.is_disconnect(error, conn.connection.dbapi_connection, None)
        if dropped:
            conn.invalidate(error)
            # Checked-in connections are closed now; checked-out ones are left to finish and
            # are closed when they come back (the engine's new pool does not take them).
            conn.engine.dispose()
        raise exc.DBAPIError.instance(
            None, None, error, dbapi.Error, connection_invalidated=dropped, dialect=conn.dialect
        ) from error
