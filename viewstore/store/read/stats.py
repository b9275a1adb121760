"""Store-wide counts (``EventStore.stats``, ``viewstore stats``), read on an open connection
inside the caller's snapshot.

The full form counts every row and groups the events by kind and the live view entries by
conversation: its cost grows with the store (docs/operations.md has the figures). The fast
form reads no table where counting is dear: on PostgreSQL each table's row count is the
statistics collector's live-row count (else the planner's estimate) where that is above
10,000, else a count (Citus's plans carry no estimate: a count there); on SQLite it counts up
to 10,000 rows and above that gives the table's largest rowid, an upper bound that is exact
until rows are deleted (``catalogue.sqlite_rows``). Neither the view sizes nor the events per
kind are given (None).
"""

from __future__ import annotations

from sqlalchemy import Connection, Table, func, select

from viewstore.store.cursors import EXACT_COUNT_LIMIT
from viewstore.store.database.schema import condensations, conversations, events, view_entries
from viewstore.store.read.catalogue import live_rows, planned_rows, sqlite_rows
from viewstore.store.records import StoreStats, ViewSizes

_TABLES = (("conversations", conversations), ("events", events), ("condensations", condensations))


def full_stats(conn: Connection) -> StoreStats:
    counts = {
        name: int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)
        for name, table in _TABLES
    }
    by_kind = {
        row.kind: row.n
        for row in conn.execute(
            select(events.c.kind, func.count().label("n"))
            .group_by(events.c.kind)
            .order_by(events.c.kind)
        )
    }
    per_conversation = (
        select(view_entries.c.conversation_id, func.count().label("n"))
        .where(view_entries.c.left_seq.is_(None))
        .group_by(view_entries.c.conversation_id)
        .subquery()
    )
    sizes = [row.n for row in conn.execute(select(per_conversation.c.n))]
    sizes += [0] * (counts["conversations"] - len(sizes))  # conversations with an empty view
    return StoreStats(
        conversations=counts["conversations"],
        events=counts["events"],
        condensations=counts["condensations"],
        exact={name: True for name, _ in _TABLES},
        view_sizes=ViewSizes(
            min=min(sizes, default=0),
            mean=round(sum(sizes) / len(sizes), 1) if sizes else 0,
            max=max(sizes, default=0),
            total=sum(sizes),
        ),
        events_by_kind=by_kind,
    )


def fast_stats(conn: Connection) -> StoreStats:
    counted = {name: _rows(conn, table) for name, table in _TABLES}
    return StoreStats(
        conversations=counted["conversations"][0],
        events=counted["events"][0],
        condensations=counted["condensations"][0],
        exact={name: exact for name, (_, exact) in counted.items()},
        view_sizes=None,
        events_by_kind=None,
    )


def _rows(conn: Connection, table: Table) -> tuple[int, bool]:
    """The table's row count and whether it is exact (see the module's docstring)."""
    if conn.dialect.name == "postgresql":
        planned = planned_rows(conn, select(table.c[table.c.keys()[0]]))
        estimate = planned if planned is None else live_rows(conn, table.name) or planned
        if estimate is not None and estimate > EXACT_COUNT_LIMIT:
            return estimate, False
    if conn.dialect.name == "sqlite":
        bounded = sqlite_rows(conn, table, EXACT_COUNT_LIMIT)
        return bounded.count, bounded.exact
    return int(conn.execute(select(func.count()).select_from(table)).scalar() or 0), True
