"""Following the change feed: ``EventStore.follow()``, a blocking iterator that wakes on commits.

The follower reads the feed (``EventStore.feed``) from its cursor until it has caught up, then
waits, and reads on. On PostgreSQL every commit that appended events sends
a notification on the store's channel (``viewstore_feed_`` and the log's schema), and the
follower waits on a connection of its own that ``LISTEN``\\s there: it opens it, plain and in
autocommit, outside the store's pool, before its first read, so a commit after that read always
wakes it. Elsewhere (SQLite, a log distributed by Citus) it polls. How long
each wait lasts, and the backoff after a dropped connection, are ``follow_state``'s.

The guarantee is the feed's: every entry the feed has, once, in the feed's order. The follower
hands on whole pages and keeps the last entry's cursor, and after a dropped connection (a
server restart, a killed backend) it reconnects and reads on from that cursor; notifications
missed meanwhile do not matter, since it reads again after reconnecting. ``viewstore.store.
follow_async`` is the same loop for asyncio.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, text

from viewstore.domain.errors import TransientStorageError
from viewstore.store.database.translate import translate_driver
from viewstore.store.distribution.shard_feed import check_map
from viewstore.store.feed.follow_state import FollowState
from viewstore.store.records import FeedEntry

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger("viewstore.follow")

CHANNEL_PREFIX = "viewstore_feed_"
_LONGEST_NAME = 48  # longer schema names go by their MD5: a channel name has at most 63 bytes
_TRIGGER = (
    "SELECT n.nspname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE t.tgrelid = to_regclass('events') AND t.tgname = 'events_feed_notify' "
    "AND t.tgenabled <> 'D'"
)

Read = Callable[[str | None, int], list[FeedEntry]]


def channel(schema: str) -> str:
    """The notification channel of the store whose log lives in ``schema`` (as the trigger
    function of the baseline migration names it)."""
    if len(schema.encode()) <= _LONGEST_NAME:
        return CHANNEL_PREFIX + schema
    return CHANNEL_PREFIX + hashlib.md5(schema.encode(), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class ListenTarget:
    """Where a follower listens: the channel, and the keyword arguments of
    ``psycopg.connect`` (or ``AsyncConnection.connect``) for a connection of its own."""

    channel: str
    params: dict[str, Any] = field(repr=False)


def listen_target(conn: Connection) -> ListenTarget | None:
    """The store's channel, read over one of the store's connections; None where commits
    notify nobody (not PostgreSQL, no trigger: a schema older than 0021, a Citus log)."""
    if conn.dialect.name != "postgresql":
        return None
    schema = conn.execute(text(_TRIGGER)).scalar()
    if schema is None:
        return None
    _, params = conn.engine.dialect.create_connect_args(conn.engine.url)
    params.pop("context", None)  # SQLAlchemy's adapters, for its own connections
    return ListenTarget(channel(str(schema)), dict(params))


def _psycopg() -> Any:
    import psycopg  # noqa: PLC0415 - PostgreSQL only

    return psycopg


class Listener:
    """A connection that listens on one channel, opened on demand, reopened after a loss."""

    def __init__(self, target: ListenTarget) -> None:
        self._target = target
        self._conn: psycopg.Connection[Any] | None = None

    def ensure(self) -> None:
        if self._conn is not None and not self._conn.closed:
            return
        psycopg = _psycopg()
        try:
            conn = psycopg.connect(**self._target.params, autocommit=True)
        except psycopg.Error as error:
            raise translate_driver(error, lost=False) from error
        try:
            conn.execute(
                psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self._target.channel))
            )
        except psycopg.Error as error:
            lost = conn.broken
            conn.close()
            raise translate_driver(error, lost=lost) from error
        self._conn = conn

    def wait(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds for a notification; the payloads of the one that
        came and of every other already queued (one read serves them all), or none."""
        conn = self._conn
        assert conn is not None, "ensure() first"
        psycopg = _psycopg()
        try:
            payloads = [n.payload for n in conn.notifies(timeout=timeout, stop_after=1)]
            if payloads:
                payloads += [n.payload for n in conn.notifies(timeout=0)]
        except psycopg.Error as error:
            lost = conn.broken or conn.closed
            self.close()
            raise translate_driver(error, lost=lost) from error
        return payloads

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def follow(
    read: Read,
    discover: Callable[[], ListenTarget | None],
    *,
    after: str | None,
    poll: float,
    limit: int,
) -> Generator[FeedEntry]:
    """Every feed entry after ``after`` as it commits, for ever; see the module's doc.

    ``read(cursor, limit)`` reads one page of the feed; ``discover()`` says where commits
    notify (None: poll). The arguments are checked here, before the first entry is asked for.
    """
    if after is not None:
        check_map(after)
    state = FollowState(after, poll, limit)
    return _follow(read, discover, state)


def _follow(
    read: Read, discover: Callable[[], ListenTarget | None], state: FollowState
) -> Generator[FeedEntry]:
    listener: Listener | None = None
    discovered = False
    try:
        while True:
            try:
                if not discovered:
                    target = discover()
                    discovered = True
                    state.woken_by_notifications(target is not None)
                    listener = None if target is None else Listener(target)
                if listener is not None:
                    listener.ensure()  # before the read: a later commit wakes it
                entries = read(state.cursor, state.limit)
            except TransientStorageError as error:
                _lost(listener, error)
                time.sleep(state.failed())
                continue
            again = state.read(entries)
            yield from entries
            if again:
                continue
            if listener is None:
                time.sleep(state.wait())
                continue
            try:
                for payload in listener.wait(state.wait()):
                    state.notified(payload)
            except TransientStorageError as error:
                _lost(listener, error)
                time.sleep(state.failed())
    finally:
        if listener is not None:
            listener.close()


def _lost(listener: Listener | None, error: TransientStorageError) -> None:
    logger.warning("following the change feed: %s; reconnecting", error)
    if listener is not None:
        listener.close()


__all__ = ["CHANNEL_PREFIX", "ListenTarget", "Listener", "channel", "follow", "listen_target"]
