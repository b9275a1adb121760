"""One listening connection for all the asyncio followers of a process: ``FollowHub``.

``follow_async`` given a ``ListenTarget`` listens on a connection of its own, one per
follower. A server that follows the feed once per client (the viewer's ``/api/feed/follow``)
would then hold one database connection per open page, outside any pool, and a few dozen
pages exhaust the server's ``max_connections``. A hub ``LISTEN``\\s once and wakes every
follower subscribed to it; each follower still reads the feed itself, from its own cursor
(through the store's pool, which is bounded), so the guarantee is the follower's as before:
notifications only say when to read.

The hub opens its connection when the first follower subscribes and closes it when the last
one leaves. A follower's first read waits (up to ``FIRST_LISTEN_WAIT``) until the hub
listens, so a commit after that read wakes it. A dropped connection is opened again, backing
off as a follower does (``follow_state``), with one log line per outage rather than one per
follower; once the hub listens again it wakes every follower, since commits in between
notified nobody. While it cannot listen the followers read every ``poll`` seconds anyway.

A hub belongs to the event loop it was made in (its events and its task do).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from viewstore.domain.errors import ViewstoreError
from viewstore.store.feed.follow import ListenTarget
from viewstore.store.feed.follow_async import AsyncListener
from viewstore.store.feed.follow_state import RETRY_MAX, RETRY_START

logger = logging.getLogger("viewstore.follow")

#: Longest wait of a new follower for the hub to listen before its first read.
FIRST_LISTEN_WAIT = 2.0
_IDLE = 60.0  # seconds per wait on the connection; it only loops round
_TXID_DIGITS = 19


class FollowHub:
    """Wakes its subscribers (``subscribe()``, passed to ``follow_async`` as its target)
    whenever a commit notifies the channel of ``target``."""

    def __init__(self, target: ListenTarget) -> None:
        self.target = target
        self.loop = asyncio.get_running_loop()
        self._subscribers: set[Subscription] = set()
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()  # of the current task's connection

    def subscribe(self) -> Subscription:
        return Subscription(self)

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    async def aclose(self) -> None:
        """Stop listening now (the subscribers fall back to reading every ``poll``)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _join(self, subscriber: Subscription) -> asyncio.Event:
        self._subscribers.add(subscriber)
        if self._task is None:
            # Each task its own event: a cancelled one, closing, must not clear the next's.
            self._listening = asyncio.Event()
            self._task = self.loop.create_task(self._run(self._listening))
        return self._listening

    def _leave(self, subscriber: Subscription) -> None:
        self._subscribers.discard(subscriber)
        if not self._subscribers and self._task is not None:
            self._task.cancel()  # it closes its connection as it ends
            self._task = None

    def _wake(self, payload: str) -> None:
        for subscriber in self._subscribers:
            subscriber.wake(payload)

    async def _run(self, listening: asyncio.Event) -> None:
        listener = AsyncListener(self.target)
        retry, down = RETRY_START, False
        try:
            while True:
                try:
                    if not listener.connected:
                        await listener.ensure()
                        listening.set()
                        retry, down = RETRY_START, False
                        self._wake("")  # listening (again): everyone reads what it missed
                    for payload in await listener.wait(_IDLE):
                        self._wake(payload)
                except ViewstoreError as error:  # lost, or refused: try again later
                    listening.clear()
                    if not down:
                        logger.warning("listening for the change feed: %s; reconnecting", error)
                    down = True
                    await listener.close()
                    await asyncio.sleep(retry)
                    retry = min(retry * 2, RETRY_MAX)
        finally:
            listening.clear()
            await listener.close()


class Subscription:
    """One follower's share of a hub: what ``follow_async`` waits on instead of a
    connection of its own."""

    def __init__(self, hub: FollowHub) -> None:
        self._hub = hub
        self._joined = False
        self._woken = asyncio.Event()
        # What the wakes since the last wait said: the newest transaction id (all the
        # follower needs of them, see FollowState.notified), and whether a wake named none.
        self._txid: int | None = None
        self._bare = False

    def wake(self, payload: str) -> None:
        if payload.isdigit() and len(payload) <= _TXID_DIGITS:
            txid = int(payload)
            self._txid = txid if self._txid is None else max(self._txid, txid)
        else:
            self._bare = True
        self._woken.set()

    async def ensure(self) -> None:
        """Subscribe (once), and wait a little for the hub to listen."""
        if self._joined:
            return
        self._joined = True
        listening = self._hub._join(self)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FIRST_LISTEN_WAIT):
                await listening.wait()

    async def wait(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds for a wake; the payloads it carried, or none."""
        if not self._woken.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._woken.wait()
        payloads = [] if self._txid is None else [str(self._txid)]
        if self._bare:
            payloads.append("")
        self._txid, self._bare = None, False
        self._woken.clear()
        return payloads

    async def close(self) -> None:
        # Nothing awaited: this runs whole even in a task being cancelled (a closed stream).
        if self._joined:
            self._joined = False
            self._hub._leave(self)


__all__ = ["FIRST_LISTEN_WAIT", "FollowHub", "Subscription"]
