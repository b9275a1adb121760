"""Engines, set up per dialect.

SQLite: the stdlib driver opens transactions lazily and never for SELECT, which gives no real
isolation; it is switched to autocommit mode here and every transaction is opened explicitly.
Writers use ``BEGIN IMMEDIATE``, taking SQLite's single write lock up front, so two appends can
never both read version N and both write N+1. The file runs in WAL mode (readers never block
the writer) with ``synchronous=NORMAL``: a commit survives a killed process, and only a power
loss can take back the last few. A busy timeout makes a second writer wait instead of failing.

PostgreSQL goes through psycopg 3; plain ``postgresql://`` URLs are pointed at it. Any other
database or driver is refused up front: the store speaks to these two drivers directly (the
fast path, the reads), so it cannot run on another. A store may live in its own PostgreSQL
schema (``schema=``), beside an application's tables of the same names; see ``_search_path``
for how every statement is kept in it.
"""

from __future__ import annotations

import os
import re
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Dialect, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from viewstore.domain.errors import InvalidArgumentError, UnsupportedDatabaseError
from viewstore.store.database import slow

DEFAULT_URL = "sqlite:///viewstore.db"
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: (database, driver) pairs the store runs on; "" is the dialect's default driver.
SUPPORTED = frozenset({("sqlite", ""), ("sqlite", "pysqlite"), ("postgresql", "psycopg")})
#: Their asyncio drivers, for ``viewstore.AsyncEventStore`` (viewstore/aio/engine.py).
ASYNC_SUPPORTED = frozenset({("sqlite", "aiosqlite"), ("postgresql", "psycopg_async")})
WRITE = {"viewstore_write": True}
# Lower-case identifiers only: they need no quoting in SQL nor escaping in libpq's options.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: The engines set up here, by their dialect object (one per engine, kept by its
#: ``execution_options`` copies and across ``dispose()``), with the schema each was set up for.
_CONFIGURED: WeakKeyDictionary[Dialect, str | None] = WeakKeyDictionary()


def default_url() -> str:
    return os.environ.get("VIEWSTORE_URL") or DEFAULT_URL


def normalize_url(url: str | URL) -> URL:
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        raise InvalidArgumentError(_not_a_url(url)) from error
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _not_a_url(url: object) -> str:
    if isinstance(url, str) and url.strip() and "://" not in url:
        # A bare path (`--url x.db`): the one mistake worth its own words.
        return (
            f"bad database URL {url!r}: a URL names the kind of database first; for the "
            f"SQLite file {url} it is sqlite:///{url} (PostgreSQL: postgresql://user@host/db)"
        )
    return (
        f"bad database URL {url!r}: a URL looks like sqlite:///file.db (a SQLite file) "
        "or postgresql://user@host/db"
    )


def check_schema(schema: str | None) -> str | None:
    if schema is not None and (not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema)):
        raise InvalidArgumentError(
            f"schema must be a lower-case SQL identifier (a-z, 0-9, _), got {schema!r}"
        )
    return schema


def configured_schema(engine: Engine) -> tuple[bool, str | None]:
    """Whether ``engine`` was made by :func:`create_engine_for`, and for which schema."""
    if engine.dialect in _CONFIGURED:
        return True, _CONFIGURED[engine.dialect]
    return False, None


def check_engine(engine: Engine, schema: str | None) -> None:
    """Refuse an engine that lacks what the store relies on, rather than run without it.

    On SQLite the store needs its connection settings (WAL, busy timeout, foreign keys, and the
    driver in autocommit mode with an explicit ``BEGIN``/``BEGIN IMMEDIATE`` per transaction:
    without them two appends can both read version N); on PostgreSQL with a schema, every
    connection's search path. Both are set when connections open, which an engine made
    elsewhere may already have done, so they cannot be added afterwards.
    """
    configured, engine_schema = configured_schema(engine)
    if configured and engine_schema == schema:
        return
    if engine.dialect.name == "sqlite" and not configured:
        raise InvalidArgumentError(
            "this SQLite engine lacks viewstore's settings (WAL, busy timeout, foreign keys, "
            "explicit BEGIN): create it with viewstore.create_engine(url, ...) or pass the URL"
        )
    if engine.dialect.name == "sqlite":
        raise InvalidArgumentError("schema= is for PostgreSQL; a SQLite store is its own file")
    if schema is not None or engine_schema is not None:
        raise InvalidArgumentError(
            f"this engine was not made for schema {schema!r}: create it with "
            f"viewstore.create_engine(url, schema={schema!r}) or pass the URL"
        )


def check_supported(url: URL, drivers: frozenset[tuple[str, str]] = SUPPORTED) -> None:
    """Raise ``UnsupportedDatabaseError`` unless the store runs on this URL's database."""
    backend, _, driver = url.drivername.partition("+")
    if (backend, driver) not in drivers:
        raise UnsupportedDatabaseError(
            f"viewstore does not run on {url.drivername!r} databases: use sqlite:///FILE or "
            "postgresql://USER@HOST/DB (psycopg 3)"
        )


def create_engine_for(url: str | URL, *, schema: str | None = None, **kwargs: Any) -> Engine:
    """An engine with viewstore's settings for its dialect (``viewstore.create_engine``).

    Applications that want to share an engine with the store (to append in their own
    transactions) create it here; ``kwargs`` go to SQLAlchemy's ``create_engine``.
    """
    parsed = normalize_url(url)
    check_supported(parsed)
    check_schema(schema)
    if schema is not None and parsed.get_backend_name() == "sqlite":
        raise InvalidArgumentError("schema= is for PostgreSQL; a SQLite store is its own file")
    try:
        engine = create_engine(parsed, **engine_options(parsed, schema, kwargs))
    except ImportError as error:
        raise missing_driver(parsed, error) from error
    configure(engine, schema)
    return engine


def missing_driver(parsed: URL, error: ImportError) -> UnsupportedDatabaseError:
    extra = ""
    if "psycopg" in str(error):
        extra = "; pip install -e '.[postgres]' (in a clone)"
    elif "aiosqlite" in str(error) or "greenlet" in str(error):
        extra = "; pip install -e '.[asyncio]' (in a clone)"
    return UnsupportedDatabaseError(
        f"the driver for {parsed.drivername!r} URLs is not installed ({error}{extra})"
    )


def configure(engine: Engine, schema: str | None) -> None:
    """Give ``engine`` (made with :func:`engine_options`) the per-connection settings and the
    watches of its dialect, and record it as set up for ``schema``. For an asyncio engine,
    this is its ``sync_engine``: the same listeners then run on the asyncio driver."""
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine, _busy_timeout_ms(engine.url))
    slow.watch(engine)
    _CONFIGURED[engine.dialect] = schema


def engine_options(parsed: URL, schema: str | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments to create an engine for ``parsed`` with: ``kwargs``, and on PostgreSQL
    the driver's connection options the store needs."""
    if parsed.get_backend_name() == "sqlite":
        _busy_timeout_ms(parsed)  # a bad timeout is refused before the engine exists
        return kwargs
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
    if schema is not None:
        _search_path(connect_args, schema)
    return kwargs


def _search_path(connect_args: dict[str, Any], schema: str) -> None:
    """Put every connection's ``search_path`` on ``schema`` alone, from its first statement.

    Chosen over schema-qualified names: the store also runs hand-written SQL (the fast path,
    view reads, the analyst views, every migration), and one unqualified name missed there
    would quietly read or write the application's table of the same name. With the schema
    alone on the path, such a name finds viewstore's table or fails; it never reaches
    ``public``. Set as a startup option (libpq ``options``), not a ``SET`` on connect: it costs
    no round trip, holds before any statement runs, and becomes the session's default, so
    ``RESET ALL`` or ``DISCARD ALL`` (as poolers issue) keep it.
    """
    option = f"-csearch_path={schema}"
    existing = connect_args.get("options")
    connect_args["options"] = f"{existing} {option}" if existing else option


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
