"""The contract suite against ``AsyncEventStore``, unchanged: a blocking face of it.

Each test of tests/contract/ runs once with ``EventStore`` and once with
:class:`BlockingAsyncStore` as its ``store_class`` (tests/contract/conftest.py). That class
takes ``EventStore``'s arguments, builds an ``AsyncEventStore`` on the same database, and runs
each method call as a coroutine on one event loop that lives in a thread of its own; the test
waits for the result. Calls from several test threads thus become concurrent tasks of that one
loop, as in an asyncio program.

``engine`` is a blocking engine of the same database (made by ``viewstore.create_engine``), for
the tests' own look at the rows: the store's engine drives an asyncio driver, which only
answers inside the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine

from viewstore import AsyncEventStore, create_engine

T = TypeVar("T")
_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_GUARD = threading.Lock()


def loop() -> asyncio.AbstractEventLoop:
    """The event loop every ``BlockingAsyncStore`` runs on, started on first use."""
    global _LOOP  # noqa: PLW0603 - one loop for the session, made when first needed
    with _LOOP_GUARD:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            threading.Thread(target=_LOOP.run_forever, name="async-store", daemon=True).start()
        return _LOOP


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on the store's loop and wait for its result (or its error)."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop()).result()


class BlockingAsyncStore:
    """``EventStore``'s constructor and methods, served by an ``AsyncEventStore``."""

    def __init__(self, url_or_engine: str | Engine | None = None, **options: Any) -> None:
        if isinstance(url_or_engine, Engine):  # another store on that database
            url: str | None = url_or_engine.url.render_as_string(hide_password=False)
        else:
            url = url_or_engine
        self.async_store = AsyncEventStore(url, **options)
        sync_url = self.async_store.engine.sync_engine.url.set(
            drivername=self.async_store.engine.dialect.name
        )
        self.engine = create_engine(sync_url, schema=options.get("schema"))

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.async_store, name, None)
        if found is None or not callable(found):
            # the blocking store's state (its tails, its settings), for tests that look at it
            return getattr(self.async_store.sync_store, name)
        if name in ("begin", "conversation_lock"):
            return self._entered(found)
        method: Callable[..., Coroutine[Any, Any, Any]] = found
        return lambda *args, **kwargs: run(method(*args, **kwargs))

    def _entered(self, opener: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def entered(*args: Any, **kwargs: Any) -> Iterator[Any]:
            manager = opener(*args, **kwargs)
            value = run(manager.__aenter__())
            try:
                yield value
            except BaseException as error:
                if not run(manager.__aexit__(type(error), error, error.__traceback__)):
                    raise
            else:
                run(manager.__aexit__(None, None, None))

        return entered

    def close(self) -> None:
        run(self.async_store.close())
        self.engine.dispose()

    def __enter__(self) -> BlockingAsyncStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
