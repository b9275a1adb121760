"""``/api/feed/follow``: the change feed as Server-Sent Events, for the viewer's "new events".

Each entry of ``EventStore.follow`` goes out as one event: ``id`` its cursor, ``data`` the entry
as JSON (``cursor``, ``conversation_id``, ``seq``, ``event_id``, ``kind``). The stream starts
after ``?after=CURSOR``, or after the ``Last-Event-ID`` a reconnecting browser sends (so a
dropped stream resumes where it stopped), or else at the feed's tail: only what commits from
now on. It never ends by itself; the browser closes it.

Each stream is an async follower (``viewstore.store.feed.follow_async``) that reads the feed in
Starlette's thread pool through the store's pool of connections, as every other handler does.
On PostgreSQL the streams of one process share one listening connection (``FeedStreams``, a
``follow_hub.FollowHub``): an open page costs no connection of its own. At most
``max_streams`` are open at once per process; one more is refused with a 503 and
``Retry-After`` (the browser's EventSource then stays shut until the page is reloaded).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store import EventStore, FeedEntry, FollowHub, ListenTarget, follow_async
from viewstore.web.params import cursor, last_event_id

#: Seconds between reads when no notification comes (and SQLite's longest poll).
POLL = 2.0
PAGE = 200
_FIELDS = ("cursor", "conversation_id", "seq", "event_id", "kind")
#: Open streams per process, unless ``create_app(max_streams=)`` or this variable says.
MAX_STREAMS_ENV = "VIEWSTORE_SERVE_MAX_STREAMS"
DEFAULT_MAX_STREAMS = 100
#: Seconds a refused stream is told to wait (``Retry-After``).
RETRY_AFTER = 10


def max_streams(given: int | None) -> int:
    """The cap on open streams: ``given``, else ``$VIEWSTORE_SERVE_MAX_STREAMS``, else 100."""
    if given is None:
        raw = os.environ.get(MAX_STREAMS_ENV, "").strip()
        if not raw:
            return DEFAULT_MAX_STREAMS
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 9 and int(raw) >= 1):
            raise InvalidArgumentError(
                f"{MAX_STREAMS_ENV} must be a whole number from 1 up, got {raw[:40]!r}"
            )
        return int(raw)
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise InvalidArgumentError(f"max_streams must be a whole number from 1 up, got {given!r}")
    return given


class FeedStreams:
    """The open streams of one app: their count under the cap, and the hub they share."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self._hub: FollowHub | None = None

    def hub(self, target: ListenTarget) -> FollowHub:
        """The hub listening at ``target`` in the running event loop (made on first use)."""
        hub = self._hub
        if hub is None or hub.loop is not asyncio.get_running_loop() or hub.target != target:
            hub = self._hub = FollowHub(target)
        return hub

    async def aclose(self) -> None:
        if self._hub is not None:
            await self._hub.aclose()


class _Stream(StreamingResponse):
    """A streaming answer that gives its slot back however it ends (a closed tab too)."""

    def __init__(self, content: AsyncIterator[str], streams: FeedStreams) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )
        self._streams: FeedStreams | None = streams

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()

    def release(self) -> None:
        if self._streams is not None:
            self._streams.open -= 1
            self._streams = None


def message(entry: FeedEntry) -> str:
    data = json.dumps({name: getattr(entry, name) for name in _FIELDS}, separators=(",", ":"))
    return f"id: {entry.cursor}\ndata: {data}\n\n"


async def follow(request: Request) -> Response:
    store: EventStore = request.app.state.store
    streams: FeedStreams = request.app.state.feed_streams
    if streams.open >= streams.limit:
        return JSONResponse(
            {"error": f"too many open feed streams ({streams.limit}); retry later", "status": 503},
            status_code=503,
            headers={"retry-after": str(RETRY_AFTER)},
        )
    streams.open += 1  # taken before any await: the check and the count cannot interleave
    taken = True
    try:
        after = last_event_id(request) or cursor(request, "after")
        if after is None:
            after = await run_in_threadpool(store.feed_tail)
        target = await run_in_threadpool(store._follow_target)

        async def read(at: str | None, limit: int) -> list[FeedEntry]:
            return await run_in_threadpool(store.feed, at, limit)

        shared = None if target is None else streams.hub(target)
        entries = follow_async(read, shared, after=after, poll=POLL, limit=PAGE)  # checks it

        async def stream() -> AsyncIterator[str]:
            yield ": following the change feed\n\n"  # the headers go out now
            try:
                async for entry in entries:
                    yield message(entry)
            finally:
                await entries.aclose()

        answer = _Stream(stream(), streams)
        taken = False  # the answer gives the slot back
        return answer
    finally:
        if taken:
            streams.open -= 1


__all__ = ["DEFAULT_MAX_STREAMS", "MAX_STREAMS_ENV", "FeedStreams", "follow", "max_streams"]
