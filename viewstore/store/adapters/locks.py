"""A lock on one conversation that excludes other processes, for adapters that need one.

The OpenHands SDK takes a lock around each event it writes (``FileStore.lock``). Appends do
not need it (``expected_version`` already refuses a stale writer), but the SDK's own
read-check-write sequence around the append is only correct if the lock really excludes
other writers, wherever they run:

- PostgreSQL: a session-level advisory lock, held on a connection of its own for as long as
  the lock is held, so it spans the append's separate transaction and every process and
  machine using the database. Polled with ``pg_try_advisory_lock`` so a timeout is exact;
  if the holder dies, the server releases the lock with its session.
- SQLite file: ``flock`` on a sidecar file next to the database (one per database: SQLite has
  one writer at a time anyway); the kernel drops it when the holder dies. An in-memory
  database is private to its process, where a thread lock suffices.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

from viewstore.store.pausing import acquire, pause

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

_POLL_SECONDS = 0.01
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def lock_key(conversation_id: str) -> int:
    """A signed 64-bit advisory-lock key for a conversation (namespaced by a prefix)."""
    digest = hashlib.sha256(b"viewstore:conversation:" + conversation_id.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def conversation_lock(engine: Engine, conversation_id: str, timeout: float) -> Iterator[None]:
    deadline = time.monotonic() + max(timeout, 0.0)
    if engine.dialect.name == "postgresql":
        with _advisory_lock(engine, lock_key(conversation_id), deadline):
            yield
        return
    database = engine.url.database
    thread_lock = _thread_lock(f"{database}\x00{conversation_id}")
    if not acquire(thread_lock, deadline - time.monotonic()):
        raise TimeoutError(f"lock on conversation {conversation_id!r} not acquired in time")
    try:
        if database and database != ":memory:" and fcntl is not None:
            with _file_lock(f"{os.path.abspath(database)}.viewstore-lock", deadline):
                yield
        else:
            yield
    finally:
        thread_lock.release()


def _thread_lock(name: str) -> threading.Lock:
    # flock is held per open file description, so threads of one process sharing the sidecar
    # would not exclude each other without this.
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(name, threading.Lock())


@contextmanager
def _advisory_lock(engine: Engine, key: int, deadline: float) -> Iterator[None]:
    with engine.connect() as pooled:
        conn = pooled.execution_options(isolation_level="AUTOCOMMIT")
        while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"advisory lock {key} not acquired in time")
            pause(_POLL_SECONDS)
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})


@contextmanager
def _file_lock(path: str, deadline: float) -> Iterator[None]:
    assert fcntl is not None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"lock file {path} not acquired in time") from None
                pause(_POLL_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
