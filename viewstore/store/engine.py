"""Engines, set up per dialect.

SQLite: the stdlib driver opens transactions lazily and never for SELECT, which gives no real
isolation; it is switched to autocommit mode here and every transaction is opened explicitly.
Writers use ``BEGIN IMMEDIATE``, taking SQLite's single write lock up front, so two appends can
never both read version N and both write N+1. The file runs in WAL mode (readers never block
the writer) with ``synchronous=NORMAL``: a commit survives a killed process, and only a power
loss can take back the last few. A busy timeout makes a second writer wait instead of failing.

PostgreSQL goes through psycopg 3; plain ``postgresql://`` URLs are pointed at it. Any other
database or driver is refused up front: the store speaks to these two drivers directly (the
fast path, the reads), so it cannot run on another.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from viewstore.errors import InvalidArgumentError, UnsupportedDatabaseError

DEFAULT_URL = "sqlite:///viewstore.db"
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: (database, driver) pairs the store runs on; "" is the dialect's default driver.
SUPPORTED = frozenset({("sqlite", ""), ("sqlite", "pysqlite"), ("postgresql", "psycopg")})
WRITE = {"viewstore_write": True}


def default_url() -> str:
    return os.environ.get("VIEWSTORE_URL") or DEFAULT_URL


def normalize_url(url: str | URL) -> URL:
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def check_supported(url: URL) -> None:
    """Raise ``UnsupportedDatabaseError`` unless the store runs on this URL's database."""
    backend, _, driver = url.drivername.partition("+")
    if (backend, driver) not in SUPPORTED:
        raise UnsupportedDatabaseError(
            f"viewstore does not run on {url.drivername!r} databases: use sqlite:///FILE or "
            "postgresql://USER@HOST/DB (psycopg 3)"
        )


def create_engine_for(url: str | URL, **kwargs: Any) -> Engine:
    parsed = normalize_url(url)
    check_supported(parsed)
    try:
        return _create_engine(parsed, **kwargs)
    except ImportError as error:
        raise UnsupportedDatabaseError(
            f"the driver for {parsed.drivername!r} URLs is not installed ({error})"
        ) from error


def _create_engine(parsed: URL, **kwargs: Any) -> Engine:
    if parsed.get_backend_name() == "sqlite":
        busy_timeout_ms = _busy_timeout_ms(parsed)
        engine = create_engine(parsed, **kwargs)
        _configure_sqlite(engine, busy_timeout_ms)
        return engine
    # No pool_pre_ping: it costs a round trip per transaction on the append hot path. After a
    # server restart the first statement on a dropped connection fails once (a
    # TransientStorageError) and the whole pool is replaced then (see translate.py).
    #
    # No server-side prepared statements (psycopg prepares a statement after 5 runs): the
    # generic plan PostgreSQL caches for it is made from the table sizes of that moment. A
    # worker that starts on a young database keeps, for the life of its connection, plans made
    # for tiny tables, such as finding an event id by scanning the whole conversation, and its
    # appends then slow down as history grows (measured: 6x at 20,000 events). Planning these
    # small statements afresh each time costs far less than that.
    connect_args = kwargs.setdefault("connect_args", {})
    connect_args.setdefault("prepare_threshold", None)
    return create_engine(parsed, **kwargs)


def _busy_timeout_ms(url: URL) -> int:
    """How long a writer waits for SQLite's write lock: the URL's ``?timeout=SECONDS`` (the
    driver's own option, which would otherwise be overridden below), else 30 s."""
    timeout = url.query.get("timeout")
    if not isinstance(timeout, str):
        return SQLITE_BUSY_TIMEOUT_MS
    try:
        return max(0, round(float(timeout) * 1000))
    except (ValueError, OverflowError) as error:  # not a number, nan, inf
        raise InvalidArgumentError(
            f"the SQLite URL's timeout must be a number of seconds, got {timeout!r}"
        ) from error


def _configure_sqlite(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get("viewstore_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
