"""Engines, set up per dialect.

SQLite: the stdlib driver opens transactions lazily and never for SELECT, which gives no real
isolation; it is switched to autocommit mode here and every transaction is opened explicitly.
Writers use ``BEGIN IMMEDIATE``, taking SQLite's single write lock up front, so two appends can
never both read version N and both write N+1. The file runs in WAL mode (readers never block
the writer) with ``synchronous=NORMAL``: a commit survives a killed process, and only a power
loss can take back the last few. A busy timeout makes a second writer wait instead of failing.

PostgreSQL goes through psycopg 3; plain ``postgresql://`` URLs are pointed at it. A store
may live in its own PostgreSQL schema (``schema=``), beside an application's tables of the same
names; see ``_search_path`` for how every statement is kept in it.
"""

from __future__ import annotations

import os
import re
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Dialect, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from viewstore.errors import InvalidArgumentError
from viewstore.store import slow

DEFAULT_URL = "sqlite:///viewstore.db"
SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE = {"viewstore_write": True}
# Lower-case identifiers only: they need no quoting in SQL nor escaping in libpq's options.
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

#: The engines set up here, by their dialect object (one per engine, kept by its
#: ``execution_options`` copies and across ``dispose()``), with the schema each was set up for.
_CONFIGURED: WeakKeyDictionary[Dialect, str | None] = WeakKeyDictionary()


def default_url() -> str:
    return os.environ.get("VIEWSTORE_URL") or DEFAULT_URL


def normalize_url(url: str | URL) -> URL:
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


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


def create_engine_for(url: str | URL, *, schema: str | None = None, **kwargs: Any) -> Engine:
    """An engine with viewstore's settings for its dialect (``viewstore.create_engine``).

    Applications that want to share an engine with the store (to append in their own
    transactions) create it here; ``kwargs`` go to SQLAlchemy's ``create_engine``.
    """
    parsed = normalize_url(url)
    check_schema(schema)
    if parsed.get_backend_name() == "sqlite":
        if schema is not None:
            raise InvalidArgumentError("schema= is for PostgreSQL; a SQLite store is its own file")
        engine = create_engine(parsed, **kwargs)
        _configure_sqlite(engine)
        slow.watch(engine)
        _CONFIGURED[engine.dialect] = None
        return engine
    # No pool_pre_ping: it costs a round trip per transaction on the append hot path; a
    # connection the server dropped surfaces as a StorageError and the pool replaces it.
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
    try:
        engine = create_engine(parsed, **kwargs)
    except ModuleNotFoundError as error:  # the dialect imports its driver here
        extra = " (pip install 'viewstore[postgres]')" if error.name == "psycopg" else ""
        raise InvalidArgumentError(
            f"the database driver for {parsed.drivername}:// is not installed: "
            f"no module {error.name!r}{extra}"
        ) from error
    slow.watch(engine)
    _CONFIGURED[engine.dialect] = schema
    return engine


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


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        write = connection.get_execution_options().get("viewstore_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
