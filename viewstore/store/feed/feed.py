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

The cursor is an opaque string of the transaction id and the position
(``viewstore.store.cursors``).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Connection, literal_column, select, tuple_

from viewstore.store.cursors import check_feed_limit, decode_feed_cursor, feed_cursor
from viewstore.store.database.schema import events
from viewstore.store.records import FeedEntry


def read_feed(conn: Connection, after: str | None, limit: int) -> list[FeedEntry]:
    """Up to ``limit`` entries after the cursor ``after`` (``None``: from the beginning).

    On PostgreSQL ``conn`` must run the whole statement on one snapshot (it does: one statement),
    and ``pg_current_snapshot()`` is that statement's snapshot, so every row below its ``xmin``
    that committed is visible to the same statement.
    """
    check_feed_limit(limit)
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
                tuple_(events.c.txid, events.c.position) > tuple_(*decode_feed_cursor(after))
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
            query = query.where(events.c.position > decode_feed_cursor(after)[1])
        query = query.order_by(events.c.position)
    query = query.limit(limit)
    return [
        FeedEntry(
            cursor=feed_cursor(row.txid, row.position),
            conversation_id=row.conversation_id,
            seq=row.seq,
            event_id=row.event_id,
            kind=row.kind,
        )
        for row in conn.execute(query)
    ]
