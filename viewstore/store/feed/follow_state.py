"""What a follower of the change feed does next: the loop both ``follow``s share, without I/O.

A follower reads ``feed(after=cursor)`` page by page, keeps the last entry's cursor, and once a
page comes back short (it has caught up) waits before it reads again. Only the waiting differs
between the blocking follower (``viewstore.store.feed.follow``) and the async one
(``viewstore.store.feed.follow_async``); this module decides how long each wait is and how long to
back off after a failure, and keeps the cursor.

* **Woken by notifications** (PostgreSQL). A commit that appended events
  notifies the follower, which then reads at once. The feed only returns rows of transactions
  older than every transaction still running (``viewstore.store.feed.feed``), so the commit that
  woke the follower may not be readable yet: a slower transaction that took an earlier
  position may still be open, and its own commit may notify nobody (it appended nothing, or it
  is another application's). The notification carries the committing transaction's id, so
  the follower knows what to wait for: until a read has shown that transaction it reads again
  every ``RECHECK`` seconds (``RECHECKS`` times, then doubling the wait up to ``poll``).
  Without any notification it reads every ``poll`` seconds anyway: the safety net (a
  notification lost with a dropped connection, a transaction outside the store holding the
  horizon back).
* **Polling** (SQLite, a Citus-distributed log). The waits
  start at ``POLL_START`` after a read that found something and double up to ``poll``.

A failure the store calls transient (``TransientStorageError``: a dropped connection, a
server restarting) backs off from ``RETRY_START`` doubling to ``RETRY_MAX``, then the follower
reconnects and reads on from the cursor it kept: nothing it yielded is yielded again, and
nothing is skipped, since the cursor is only moved past entries handed to the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.cursors import check_feed_limit, decode_feed_cursor
from viewstore.store.records import FeedEntry

RECHECK = 0.02
RECHECKS = 50  # a notified transaction not shown yet: read every RECHECK s, this many times
POLL_START = 0.05
RETRY_START = 0.1
RETRY_MAX = 5.0
MAX_POLL = 3600.0
DEFAULT_POLL = 1.0
DEFAULT_LIMIT = 1000


def check_poll(poll: float) -> float:
    """``poll`` as seconds: a number above 0 and at most an hour."""
    if (
        isinstance(poll, bool)
        or not isinstance(poll, int | float)
        or not math.isfinite(poll)
        or not 0 < poll <= MAX_POLL
    ):
        raise InvalidArgumentError(
            f"follow poll must be a number of seconds above 0 and at most {MAX_POLL:g}, "
            f"got {poll!r}"
        )
    return float(poll)


@dataclass
class FollowState:
    """The cursor and the timing of one follower. ``listening``: notifications wake it."""

    cursor: str | None
    poll: float
    limit: int
    listening: bool = False
    _next_wait: float | None = None
    _retry: float = RETRY_START
    _awaited: int | None = None  # the newest notified txid the feed has not shown yet
    _rechecks: int = 0

    def __post_init__(self) -> None:
        self.poll = check_poll(self.poll)
        self.limit = check_feed_limit(self.limit)
        self.woken_by_notifications(self.listening)

    def woken_by_notifications(self, listening: bool) -> None:
        """Say whether commits wake this follower (known once it reached the store)."""
        self.listening = listening
        self._next_wait = None if listening else POLL_START

    def read(self, entries: Sequence[FeedEntry]) -> bool:
        """Note a page the feed returned (to be handed to the caller whole); True: the page
        was full, read the next one at once."""
        self._retry = RETRY_START  # the store answered: a later failure starts over
        if entries:
            self.cursor = entries[-1].cursor
            if not self.listening:
                self._next_wait = POLL_START
        if self._awaited is not None and _txid(self.cursor) >= self._awaited:
            self._awaited = None  # its rows were handed on (the feed gives a txid's together)
        return len(entries) >= self.limit

    def notified(self, payload: str = "") -> None:
        """A commit notified the follower (``payload``: its transaction id, docs/schema.md):
        look again soon, and keep looking until the feed has shown that transaction."""
        txid = int(payload) if payload.isdigit() and len(payload) <= _TXID_DIGITS else None
        if txid is None:
            self._next_wait = RECHECK
            return
        if self._awaited is None or txid > self._awaited:
            self._awaited = txid
            self._rechecks = 0

    def wait(self) -> float:
        """Seconds to wait (for a notification, when listening) before the next read."""
        if self._awaited is not None and self._rechecks < RECHECKS:
            self._rechecks += 1
            return min(RECHECK, self.poll)
        if self._awaited is not None and self._rechecks == RECHECKS:
            self._rechecks += 1
            self._next_wait = RECHECK * 2  # held back for long: back off from here
        if self._next_wait is None:
            return self.poll
        wait = min(self._next_wait, self.poll)
        doubled = self._next_wait * 2
        self._next_wait = doubled if doubled < self.poll else None
        if not self.listening and self._next_wait is None:
            self._next_wait = self.poll  # polling: stay at the bound until something comes
        return wait

    def failed(self) -> float:
        """Seconds to back off after a transient failure, before reconnecting."""
        delay = self._retry
        self._retry = min(delay * 2, RETRY_MAX)
        return delay


_TXID_DIGITS = 19


def _txid(cursor: str | None) -> int:
    """The transaction id of a single-server cursor (0 for none; a per-node map, which no
    notification concerns, counts as past every one)."""
    if cursor is None:
        return 0
    if "=" in cursor:
        return 2**63
    return decode_feed_cursor(cursor)[0]


__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_POLL",
    "FollowState",
    "check_poll",
]
