"""Asyncio engines with the store's settings: ``viewstore.aio.create_async_engine``.

The store's settings are set when each connection opens and each transaction begins (see
``viewstore.store.database.engine``). They are given to the asyncio engine's
``sync_engine``, the engine SQLAlchemy drives the asyncio driver through, so they are the very
listeners and options the blocking store uses: aiosqlite connections get the same pragmas
and the same explicit ``BEGIN``/``BEGIN IMMEDIATE``, psycopg's asyncio connections the same
connection options.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.asyncio import create_async_engine as _create_async_engine

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store import (
    ASYNC_SUPPORTED,
    check_schema,
    check_supported,
    configure,
    engine_options,
    missing_driver,
    normalize_url,
)

#: The asyncio driver of each blocking one: a URL written for ``EventStore`` serves as is.
_ASYNC_DRIVERS = {
    ("sqlite", ""): "sqlite+aiosqlite",
    ("sqlite", "pysqlite"): "sqlite+aiosqlite",
    ("postgresql", "psycopg"): "postgresql+psycopg_async",
}


def async_url(url: str | URL) -> URL:
    """``url`` with its database's asyncio driver (``sqlite:///f.db`` becomes
    ``sqlite+aiosqlite:///f.db``; ``postgresql://`` and ``postgresql+psycopg://`` become
    ``postgresql+psycopg_async://``); an asyncio URL stays as it is."""
    parsed = normalize_url(url)
    backend, _, driver = parsed.drivername.partition("+")
    drivername = _ASYNC_DRIVERS.get((backend, driver))
    return parsed if drivername is None else parsed.set(drivername=drivername)


def create_async_engine(url: str | URL, *, schema: str | None = None, **kwargs: Any) -> AsyncEngine:
    """An asyncio engine with viewstore's settings for its dialect, to share with an
    ``AsyncEventStore``; ``kwargs`` go to SQLAlchemy's ``create_async_engine``."""
    parsed = async_url(url)
    check_supported(parsed, ASYNC_SUPPORTED)
    check_schema(schema)
    if schema is not None and parsed.get_backend_name() == "sqlite":
        raise InvalidArgumentError("schema= is for PostgreSQL; a SQLite store is its own file")
    try:
        engine = _create_async_engine(parsed, **engine_options(parsed, schema, kwargs))
    except ImportError as error:
        raise missing_driver(parsed, error) from error
    configure(engine.sync_engine, schema)
    return engine
