"""The asyncio store's calls, each run to its end in a task of its own: ``Calls``.

A task cancelled while it waits for the database used to get its ``CancelledError`` inside the
blocking code, at whatever driver call it was waiting on, and unwind from there. On aiosqlite a
statement handed to the connection's thread still runs after its caller gave up; when the
unwinding itself is cancelled again, or when a statement was issued past SQLAlchemy's own
transaction tracking, a pooled connection could be handed back still inside ``BEGIN
IMMEDIATE``, and every writer after it waited on SQLite's write lock for good. So no
cancellation is let into that code at all: each call runs in a task the caller awaits through
``asyncio.shield``. A cancelled caller gets its ``CancelledError`` at once; the call it left
runs on to its end (an append is then whole or, on an error, absent) and its result is
dropped. ``settle()`` waits for such calls, as the store's ``close()`` does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

_R = TypeVar("_R")


class Calls:
    """The calls a store has under way."""

    __slots__ = ("_running",)

    def __init__(self) -> None:
        self._running: set[asyncio.Task[Any]] = set()

    def start(self, call: Coroutine[Any, Any, _R]) -> asyncio.Task[_R]:
        """``call`` as a task of its own, kept until it ends."""
        task = asyncio.get_running_loop().create_task(call)
        self._running.add(task)
        task.add_done_callback(self._ended)
        return task

    async def run(self, call: Coroutine[Any, Any, _R]) -> _R:
        """``call``'s result; a cancelled caller leaves it running."""
        return await asyncio.shield(self.start(call))

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            # Marks an error as seen: a caller that was cancelled has no use for it, and it
            # must not be logged as an error nobody retrieved.
            task.exception()

    async def settle(self) -> None:
        """Wait until every call under way, and any it started, has ended."""
        while self._running:
            await asyncio.wait(set(self._running))
