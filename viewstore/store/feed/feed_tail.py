"""The change feed's tail: the cursor of the newest entry the feed shows now.

Following from it yields only what commits later, without reading the feed from its start (the
viewer's "new events" stream starts there). On PostgreSQL it is the last row in the feed's
order, ``(txid, position)``, below the reading snapshot's ``xmin``: every row that shows later
belongs to a transaction at or above that ``xmin`` (every one below it has ended), so it comes
after this cursor, and nothing the feed showed before comes again. One backward step of the
``(txid, position)`` index. On SQLite it is the greatest position.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

from viewstore.store.cursors import feed_cursor

_POSTGRES = (
    "SELECT txid, position FROM events "
    "WHERE txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint "
    "ORDER BY txid DESC, position DESC LIMIT 1"
)
_SQLITE = "SELECT 0, position FROM events ORDER BY position DESC LIMIT 1"


def tail_cursor(conn: Connection) -> str | None:
    """The newest entry's cursor (None: the feed shows nothing yet; follow from the start)."""
    query = _POSTGRES if conn.dialect.name == "postgresql" else _SQLITE
    row = conn.execute(text(query)).first()
    return None if row is None else feed_cursor(int(row[0]), int(row[1]))


__all__ = ["tail_cursor"]
