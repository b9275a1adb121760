"""The writes that go to the driver directly, in one round trip: their one owner.

Two writes are so frequent and so small that SQLAlchemy's own transaction and statement work
around them costs more than the writes: an append on the fast path
(``viewstore.store.append.fast_path``) and a base-state save
(``viewstore.store.adapters.base_state``). Both run on the driver's own connection, checked out
of the store's pool, and everything that must then be right is done here, once:

* **PostgreSQL** (``postgres_autocommit``): psycopg's connection in autocommit for the one
  statement the caller sends (atomic as every single statement is), and back out of it
  afterwards, even when the statement failed; the connection returns to the pool as it came.
* **SQLite** (``sqlite_immediate``): the caller's statements inside ``BEGIN IMMEDIATE`` (the
  write lock taken up front, as every writer of the store takes it), committed or rolled back
  as the caller says, and rolled back on any error without letting a failed rollback take the
  error's place. On aiosqlite the whole transaction is one hand-off to the connection's thread
  (viewstore/store/database/aiosqlite_thread.py), so no part of it is left queued there.
* **Both**: the driver's errors are translated as the store's own statements' are
  (``translate.driver_errors``), a dropped connection invalidating the pool.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from sqlalchemy import Dialect, Engine

from viewstore.store.database.translate import driver_errors

_T = TypeVar("_T")


@contextmanager
def postgres_autocommit(engine: Engine) -> Iterator[Any]:
    """psycopg's connection (or SQLAlchemy's blocking face of its asyncio one) in autocommit,
    for one statement; the driver's errors translated when they leave the block."""
    with engine.connect() as conn, driver_errors(conn):
        driver = conn.connection.dbapi_connection
        assert driver is not None
        driver.autocommit = True
        try:
            yield driver
        finally:
            if not driver.closed:
                driver.autocommit = False


def sqlite_immediate(engine: Engine, work: Callable[[Any], tuple[bool, _T]]) -> _T:
    """``work(connection)`` inside ``BEGIN IMMEDIATE`` on the driver's connection (sqlite3's,
    or one that serves its calls); it returns whether to commit and its result. Made of plain
    sqlite3 calls with its statements prepared beforehand, it runs on aiosqlite's thread
    whole."""

    def transaction(driver: Any) -> _T:
        driver.execute("BEGIN IMMEDIATE")
        try:
            commit, result = work(driver)
            if commit:
                driver.execute("COMMIT")
            else:
                driver.rollback()
            return result
        except BaseException:
            # The error in flight says why (a full disk, say); a failed rollback must not take
            # its place. The driver's rollback is a no-op where SQLite has already rolled back
            # by itself (SQLITE_FULL, an I/O error, SQLITE_NOMEM...).
            with suppress(sqlite3.Error):
                driver.rollback()
            raise

    with engine.connect() as conn, driver_errors(conn):
        driver = conn.connection.driver_connection
        assert driver is not None
        if isinstance(driver, sqlite3.Connection):
            return transaction(driver)
        from viewstore.store.database.aiosqlite_thread import run_on_thread  # noqa: PLC0415 - the asyncio store's

        return run_on_thread(driver, transaction)


def sqlite_timestamp(dialect: Dialect, column: Any) -> Callable[[Any], Any]:
    """SQLAlchemy's own text form of a timestamp for ``column`` on this dialect, so that a row
    written here reads back as one the store's statements wrote."""
    processor = column.type.dialect_impl(dialect).bind_processor(dialect)
    return (lambda value: value) if processor is None else processor
