"""A one-round-trip SQLite transaction on an aiosqlite connection: ``run_on_thread``.

aiosqlite runs every call on a thread of its own, and each call is one hand-off to that thread
and one back to the event loop; the hand-offs, not the writes, were most of an append's time
(SQLAlchemy's adapter spends two or three on a statement). The transactions that go to the
driver directly (``round_trip.sqlite_immediate``: the fast path's append, a base-state save)
are plain sqlite3 code with their statements made beforehand, so each is sent to the
connection's thread whole: one hand-off for the whole append, and no part of
it left queued there if its caller gives up (docs/asyncio.md, "Cancellation").

aiosqlite offers no public call for that. Its connection's ``_execute`` (queue a function on
the thread) and ``_connection`` (the sqlite3 connection) are private: should a release rename
them, the transaction runs as before, one hand-off per call, through ``BlockingConnection``
(tests/store/test_async_store.py runs appends both ways). Called from the store's greenlet
only (``await_only``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import aiosqlite
from sqlalchemy.util.concurrency import await_only

Parameters = Sequence[Any] | Mapping[str, Any]
_R = TypeVar("_R")
#: Send the transaction whole when aiosqlite allows it (False: one call at a time, as tested).
WHOLE = True


def run_on_thread(connection: aiosqlite.Connection, fn: Callable[[Any], _R]) -> _R:
    """``fn(sqlite3 connection)`` on ``connection``'s thread, awaited."""
    queue = getattr(connection, "_execute", None) if WHOLE else None
    raw = getattr(connection, "_connection", None)
    if queue is None or not isinstance(raw, sqlite3.Connection):
        return fn(BlockingConnection(connection))
    return await_only(queue(fn, raw))  # type: ignore[no-any-return]


class BlockingConnection:
    """``execute``, ``executemany`` and ``rollback`` of sqlite3's connection, served by an
    aiosqlite connection one call at a time."""

    __slots__ = ("_connection",)

    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Parameters = ()) -> BlockingCursor:
        return BlockingCursor(await_only(self._connection.execute(sql, parameters)))

    def executemany(self, sql: str, parameters: Iterable[Parameters]) -> BlockingCursor:
        return BlockingCursor(await_only(self._connection.executemany(sql, parameters)))

    def rollback(self) -> None:
        """Queued on the connection's thread like every call, so it runs after any statement
        queued before it; sqlite3 skips it when no transaction is open."""
        await_only(self._connection.rollback())


class BlockingCursor:
    """What the transactions read of sqlite3's cursor, served by an aiosqlite cursor."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: aiosqlite.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        return await_only(self._cursor.fetchone())
