"""Waiting that also suits the asyncio store: ``pause`` and ``acquire``.

``viewstore.AsyncEventStore`` runs the very code of ``EventStore`` in a greenlet of
SQLAlchemy's asyncio layer (viewstore/aio/store.py), on the event loop's thread. A blocking
wait there would stop every task of the loop, including the one the wait is for: so the few
places that wait (the retry loop's backoff, the conversation lock's polling) wait through here,
which hands the loop back while waiting when called from such a greenlet, and blocks as before
anywhere else.
"""

from __future__ import annotations

import asyncio
import threading
import time

from sqlalchemy.util.concurrency import await_only, in_greenlet

#: How often a task of an event loop tries a thread lock again.
POLL_SECONDS = 0.01


def pause(seconds: float) -> None:
    """Sleep ``seconds``: ``asyncio.sleep`` inside the asyncio store, ``time.sleep`` elsewhere."""
    if in_greenlet():
        await_only(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def acquire(lock: threading.Lock, timeout: float) -> bool:
    """``lock.acquire(timeout=timeout)``, except inside the asyncio store, where it polls: the
    tasks of one loop share its thread, and a task blocked on a lock another task holds would
    keep that task from ever releasing it."""
    if not in_greenlet():
        return lock.acquire(timeout=max(timeout, 0.0))
    deadline = time.monotonic() + timeout
    while not lock.acquire(blocking=False):
        if time.monotonic() >= deadline:
            return False
        pause(POLL_SECONDS)
    return True
