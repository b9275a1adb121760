"""A blocking face of an aiosqlite connection, for the SQLite fast path's driver-level
transaction (``fast_path.write_sqlite``) on the asyncio store.

aiosqlite runs every call in a thread of its own, and each call is one hand-off to that
thread and one back to the event loop. SQLAlchemy's adapter spends two or three on a statement
(a cursor, then the statement, then its rows); aiosqlite's own ``execute`` and ``executemany``
make and run the cursor in one. The fast path's five or six statements thus cost about half
the hand-offs, which is most of an append's time on aiosqlite. Called from the store's
greenlet only (``await_only``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import aiosqlite
from sqlalchemy.util.concurrency import await_only

Parameters = Sequence[Any] | Mapping[str, Any]


class BlockingConnection:
    """``execute``, ``executemany`` and ``rollback`` of sqlite3's connection, served
    by an aiosqlite connection."""

    __slots__ = ("_connection",)

    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, parameters: Parameters = ()) -> aiosqlite.Cursor:
        return await_only(self._connection.execute(sql, parameters))

    def executemany(self, sql: str, parameters: Iterable[Parameters]) -> aiosqlite.Cursor:
        return await_only(self._connection.executemany(sql, parameters))

    def rollback(self) -> None:
        """Queued on the connection's thread like every call, so it runs after any statement
        queued before it, even one whose caller was cancelled; sqlite3 skips it when no
        transaction is open. Queued at once, it runs even if this wait is cancelled too."""
        await_only(self._connection.rollback())
