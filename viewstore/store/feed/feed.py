"""The change feed: events of every conversation in commit order, read with a cursor.

A consumer reads ``store.feed(after=cursor)``, handles the entries, and stores the last entry's
``cursor`` for the next call. The feed never skips an event and never repeats one, and it takes
no lock of any kind (writers are never slowed down by readers):

* **PostgreSQL.** Positions come from a sequence when an append runs, not when it commits, so a
  slow transaction can commit position 7 after position 8 is already visible: a reader that
  paged by position would have moved past 7 for good. Each event row therefore also records
  the writing transaction's id (``pg_current_xact_id()``), and the feed orders on
  ``(txid, position)`` and returns only rows whose ``txid`` is below the reading snapshot's
  ``xmin``, the oldest transaction still running. Every transaction below ``xmin`` has ended,
  so no row can ever appear before the cursor later. The price: the feed lags behind the
  oldest open transaction *of the whole server* (any database; a long idle-in-transaction
  session holds every feed back until it ends).
* **SQLite.** One writer at a time (``BEGIN IMMEDIATE``) assigns ``max(position) + 1``, so
  position order is commit order; ``txid`` is always 0 there and the same ordering applies.

The cursor is an opaque string: ``f1.`` and the transaction id and the position as 16 hex
digits each (``f1.0000000000000000000000000000000a``). It reads as no number (the position
``9`` and then ``10`` once printed as ``0.9`` and ``0.10``, which look like decimals going
backwards), and being of one width, cursors sort as text in feed order. The older form
``"<txid>.<position>"`` is still accepted as ``after``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import BigInteger, Connection, literal_column, select, tuple_

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.database.schema import events

MAX_FEED_LIMIT = 100_000
CURSOR_PREFIX = "f1."
_HEX_DIGITS = 16  # one 64-bit number
_CURSOR = re.compile(r"f1\.([0-9a-f]{16})([0-9a-f]{16})")
# The cursors of viewstore 0.1.0 and before: still accepted, never handed out.
_OLD_CURSOR = re.compile(r"([0-9]{1,19})\.([0-9]{1,19})")
_BIGINT_MAX = 2**63 - 1


@dataclass(frozen=True)
class FeedEntry:
    """One event in the change feed; pass ``cursor`` as ``after`` to continue past it."""

    cursor: str
    conversation_id: str
    seq: int
    event_id: str
    kind: str


def encode_cursor(txid: int, position: int) -> str:
    return f"{CURSOR_PREFIX}{txid:0{_HEX_DIGITS}x}{position:0{_HEX_DIGITS}x}"


def decode_cursor(cursor: str) -> tuple[int, int]:
    """The ``(txid, position)`` a cursor stands for; ``InvalidArgumentError`` when malformed."""
    if not isinstance(cursor, str):
        raise InvalidArgumentError(
            f"feed cursor must be a string from FeedEntry.cursor, got {type(cursor).__name__}"
        )
    match = _CURSOR.fullmatch(cursor)
    base = 16
    if match is None:
        match = _OLD_CURSOR.fullmatch(cursor)
        base = 10
    if match is None:
        raise InvalidArgumentError(f"malformed feed cursor {cursor[:80]!r}")
    txid, position = int(match.group(1), base), int(match.group(2), base)
    if txid > _BIGINT_MAX or position > _BIGINT_MAX:
        raise InvalidArgumentError(f"feed cursor {cursor!r} is out of range")
    return txid, position


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_FEED_LIMIT:
        raise InvalidArgumentError(
            f"feed limit must be an integer between 1 and {MAX_FEED_LIMIT}, got {limit!r}"
        )
    return limit


def read_feed(conn: Connection, after: str | None, limit: int) -> list[FeedEntry]:
    """Up to ``limit`` entries after the cursor ``after`` (``None``: from the beginning).

    On PostgreSQL ``conn`` must run the whole statement on one snapshot (it does: one statement),
    and ``pg_current_snapshot()`` is that statement's snapshot, so every row below its ``xmin``
    that committed is visible to the same statement.
    """
    check_limit(limit)
    query = select(
        events.c.txid,
        events.c.position,
        events.c.conversation_id,
        events.c.seq,
        events.c.event_id,
        events.c.kind,
    )
    if conn.dialect.name == "postgresql":
        if after is not None:
            query = query.where(
                tuple_(events.c.txid, events.c.position) > tuple_(*decode_cursor(after))
            )
        horizon = literal_column(
            "pg_snapshot_xmin(pg_current_snapshot())::text::bigint", type_=BigInteger
        )
        query = query.where(events.c.txid < horizon)
        query = query.order_by(events.c.txid, events.c.position)
    else:
        # SQLite: txid is always 0 and commit order is position order; the unique position
        # index serves this order (there is no (txid, position) index on SQLite).
        if after is not None:
            query = query.where(events.c.position > decode_cursor(after)[1])
        query = query.order_by(events.c.position)
    query = query.limit(limit)
    return [
        FeedEntry(
            cursor=encode_cursor(row.txid, row.position),
            conversation_id=row.conversation_id,
            seq=row.seq,
            event_id=row.event_id,
            kind=row.kind,
        )
        for row in conn.execute(query)
    ]


__all__ = [
    "CURSOR_PREFIX",
    "MAX_FEED_LIMIT",
    "FeedEntry",
    "check_limit",
    "decode_cursor",
    "encode_cursor",
    "read_feed",
]
