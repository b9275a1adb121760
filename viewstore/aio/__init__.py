"""viewstore for asyncio programs: ``AsyncEventStore`` (also ``viewstore.AsyncEventStore``),
``create_async_engine``, and ``append_with_retry`` awaited. See docs/asyncio.md."""

from __future__ import annotations

import importlib

from viewstore.domain.errors import MissingExtraError

try:
    # SQLAlchemy's asyncio layer runs on greenlet; without it SQLAlchemy's own ImportError
    # says to install `sqlalchemy[asyncio]`, which is not the install that gives viewstore's.
    importlib.import_module("greenlet")
except ImportError as error:
    raise MissingExtraError("viewstore's asyncio store", "asyncio", error) from None

from viewstore.aio.engine import async_url, create_async_engine
from viewstore.aio.retry import append_with_retry
from viewstore.aio.store import AsyncEventStore

__all__ = ["AsyncEventStore", "append_with_retry", "async_url", "create_async_engine"]
