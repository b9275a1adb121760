"""viewstore for asyncio programs: ``AsyncEventStore`` (also ``viewstore.AsyncEventStore``),
``create_async_engine``, and ``append_with_retry`` awaited. See docs/asyncio.md."""

from __future__ import annotations

from viewstore.aio.engine import async_url, create_async_engine
from viewstore.aio.retry import append_with_retry
from viewstore.aio.store import AsyncEventStore

__all__ = ["AsyncEventStore", "append_with_retry", "async_url", "create_async_engine"]
