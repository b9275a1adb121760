"""``/api/feed/follow``: the change feed as Server-Sent Events, for the viewer's "new events".

Each entry of ``EventStore.follow`` goes out as one event: ``id`` its cursor, ``data`` the entry
as JSON (``cursor``, ``conversation_id``, ``seq``, ``event_id``, ``kind``). The stream starts
after ``?after=CURSOR``, or after the ``Last-Event-ID`` a reconnecting browser sends (so a
dropped stream resumes where it stopped), or else at the feed's tail: only what commits from
now on. It never ends by itself; the browser closes it. The follower is the async one
(``viewstore.store.read.follow_async``): it waits on a listening connection of its own and reads the
feed in Starlette's thread pool, as every other handler does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from viewstore.store import EventStore
from viewstore.store.read.feed import FeedEntry
from viewstore.store.read.follow_async import follow_async
from viewstore.web.params import cursor, last_event_id

#: Seconds between reads when no notification comes (and SQLite's longest poll).
POLL = 2.0
PAGE = 200
_FIELDS = ("cursor", "conversation_id", "seq", "event_id", "kind")


def message(entry: FeedEntry) -> str:
    data = json.dumps({name: getattr(entry, name) for name in _FIELDS}, separators=(",", ":"))
    return f"id: {entry.cursor}\ndata: {data}\n\n"


async def follow(request: Request) -> StreamingResponse:
    store: EventStore = request.app.state.store
    after = last_event_id(request) or cursor(request, "after")
    if after is None:
        after = await run_in_threadpool(store.feed_tail)
    target = await run_in_threadpool(store._follow_target)

    async def read(at: str | None, limit: int) -> list[FeedEntry]:
        return await run_in_threadpool(store.feed, at, limit)

    entries = follow_async(read, target, after=after, poll=POLL, limit=PAGE)  # checks `after`

    async def stream() -> AsyncIterator[str]:
        yield ": following the change feed\n\n"  # the headers go out now, not at the first entry
        try:
            async for entry in entries:
                yield message(entry)
        finally:
            await entries.aclose()

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


__all__ = ["follow", "message"]
