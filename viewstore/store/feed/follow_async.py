"""Following the change feed with asyncio: ``follow_async``, the async twin of ``follow``.

The loop, the cursor and the timing are ``follow_state``'s, as for the blocking follower
(``viewstore.store.feed.follow``); only the waiting differs: here it awaits a notification on a
``psycopg.AsyncConnection`` of its own (autocommit, outside any pool) or sleeps.

It reads the feed through a callable it is given, ``read(cursor, limit)`` returning an
awaitable page, so an async store plugs in its own ``feed``; and it is told where commits
notify by a ``ListenTarget`` (None: poll). An async store that runs the blocking store's
methods in SQLAlchemy's greenlets gets that from ``EventStore._follow_target()`` the same way::

    target = await run_in_greenlet(sync_store._follow_target)
    async for entry in follow_async(async_store.feed, target, after=cursor):
        ...

The iterator never ends by itself; ``aclose()`` it (or leave an ``async for``) to close its
connection. Many followers in one process can share one listening connection instead: pass
a ``viewstore.store.feed.follow_hub.FollowHub`` as the target.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from viewstore.domain.errors import TransientStorageError
from viewstore.store.database.translate import translate_driver
from viewstore.store.distribution.shard_feed import check_map
from viewstore.store.feed.follow import ListenTarget
from viewstore.store.feed.follow_state import DEFAULT_LIMIT, DEFAULT_POLL, FollowState
from viewstore.store.records import FeedEntry

if TYPE_CHECKING:
    from viewstore.store.feed.follow_hub import FollowHub

logger = logging.getLogger("viewstore.follow")

AsyncRead = Callable[[str | None, int], Awaitable[list[FeedEntry]]]


class AsyncListener:
    """``viewstore.store.feed.follow.Listener`` on an asyncio connection."""

    def __init__(self, target: ListenTarget) -> None:
        self._target = target
        self._conn: Any = None

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def ensure(self) -> None:
        if self.connected:
            return
        import psycopg  # noqa: PLC0415 - PostgreSQL only

        try:
            conn = await psycopg.AsyncConnection.connect(**self._target.params, autocommit=True)
        except psycopg.Error as error:
            raise translate_driver(error, lost=False) from error
        try:
            await conn.execute(
                psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self._target.channel))
            )
        except psycopg.Error as error:
            lost = bool(conn.broken)
            await conn.close()
            raise translate_driver(error, lost=lost) from error
        self._conn = conn

    async def wait(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds for a notification; the payloads of the one that
        came and of every one already queued, or none."""
        import psycopg  # noqa: PLC0415

        conn = self._conn
        assert conn is not None, "ensure() first"
        payloads: list[str] = []
        try:
            async for notify in conn.notifies(timeout=timeout, stop_after=1):
                payloads.append(notify.payload)
            if payloads:
                async for notify in conn.notifies(timeout=0):
                    payloads.append(notify.payload)
        except psycopg.Error as error:
            lost = bool(conn.broken or conn.closed)
            await self.close()
            raise translate_driver(error, lost=lost) from error
        return payloads

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


class Waiter(Protocol):
    """What a follower waits on: a connection of its own (``AsyncListener``) or its share of
    one that many followers use (``follow_hub.Subscription``)."""

    async def ensure(self) -> None: ...

    async def wait(self, timeout: float) -> list[str]: ...

    async def close(self) -> None: ...


def follow_async(
    read: AsyncRead,
    target: ListenTarget | FollowHub | None,
    *,
    after: str | None = None,
    poll: float = DEFAULT_POLL,
    limit: int = DEFAULT_LIMIT,
) -> AsyncGenerator[FeedEntry]:
    """Every feed entry after ``after`` as it commits, for ever (``EventStore.follow``'s
    guarantee and timing). ``target``: where commits notify (listened to on a connection of
    this follower's own), or a ``FollowHub`` that listens for many followers; None: poll.
    The arguments are checked here, before the first entry."""
    if after is not None:
        check_map(after)
    state = FollowState(after, poll, limit)
    state.woken_by_notifications(target is not None)
    waiter: Waiter | None
    if target is None:
        waiter = None
    elif isinstance(target, ListenTarget):
        waiter = AsyncListener(target)
    else:
        waiter = target.subscribe()
    return _follow(read, waiter, state)


async def _follow(
    read: AsyncRead, listener: Waiter | None, state: FollowState
) -> AsyncGenerator[FeedEntry]:
    try:
        while True:
            try:
                if listener is not None:
                    await listener.ensure()  # before the read: a later commit wakes it
                entries = await read(state.cursor, state.limit)
            except TransientStorageError as error:
                await _lost(listener, error)
                await asyncio.sleep(state.failed())
                continue
            again = state.read(entries)
            for entry in entries:
                yield entry
            if again:
                continue
            if listener is None:
                await asyncio.sleep(state.wait())
                continue
            try:
                for payload in await listener.wait(state.wait()):
                    state.notified(payload)
            except TransientStorageError as error:
                await _lost(listener, error)
                await asyncio.sleep(state.failed())
    finally:
        if listener is not None:
            await listener.close()


async def _lost(listener: Waiter | None, error: TransientStorageError) -> None:
    logger.warning("following the change feed: %s; reconnecting", error)
    if isinstance(listener, AsyncListener):  # a hub looks after its own connection
        await listener.close()


__all__ = ["AsyncListener", "Waiter", "follow_async"]
