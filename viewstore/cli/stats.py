"""Store-wide counts for ``viewstore stats`` (one read transaction).

The full form counts every row and groups the events by kind and the live view entries by
conversation: its cost grows with the store (docs/operations.md has the figures). ``--fast``
(:func:`fast_stats`) reads no table where counting is dear: on PostgreSQL each table's row
count is the statistics collector's live-row count (else the planner's estimate) where that
is above 10,000, else a count (Citus's plans carry no estimate: a count there); on SQLite it
counts up to 10,000 rows and above that gives the table's largest rowid, an upper bound that
is exact until rows are deleted (``catalogue.sqlite_rows``).
Neither the view sizes nor the events per kind are given (None).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, func, select

from viewstore.store import EventStore
from viewstore.store.database.schema import condensations, conversations, events, view_entries
from viewstore.store.database.translate import translated
from viewstore.store.read.catalogue import (
    EXACT_COUNT_LIMIT,
    live_rows,
    planned_rows,
    sqlite_rows,
)


def collect_stats(store: EventStore) -> dict[str, Any]:
    sizes_query = (
        select(view_entries.c.conversation_id, func.count().label("n"))
        .where(view_entries.c.left_seq.is_(None))
        .group_by(view_entries.c.conversation_id)
        .subquery()
    )
    with translated(), store.engine.connect() as conn:
        n_conversations = conn.execute(select(func.count()).select_from(conversations)).scalar()
        n_events = conn.execute(select(func.count()).select_from(events)).scalar()
        n_condensations = conn.execute(select(func.count()).select_from(condensations)).scalar()
        by_kind = {
            row.kind: row.n
            for row in conn.execute(
                select(events.c.kind, func.count().label("n"))
                .group_by(events.c.kind)
                .order_by(events.c.kind)
            )
        }
        sizes = [row.n for row in conn.execute(select(sizes_query.c.n))]
    n_conv = int(n_conversations or 0)
    sizes += [0] * (n_conv - len(sizes))  # conversations with an empty view
    return {
        "conversations": n_conv,
        "events": int(n_events or 0),
        "condensations": int(n_condensations or 0),
        "view_sizes": {
            "min": min(sizes, default=0),
            "mean": round(sum(sizes) / len(sizes), 1) if sizes else 0,
            "max": max(sizes, default=0),
            "total": sum(sizes),
        },
        "events_by_kind": by_kind,
    }


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


def fast_stats(store: EventStore) -> dict[str, Any]:
    """``viewstore stats --fast``: the counts, estimated where counting is dear."""
    numbers: dict[str, Any] = {}
    exact: dict[str, bool] = {}
    with translated(), store.engine.connect() as conn:
        for name, table in (
            ("conversations", conversations),
            ("events", events),
            ("condensations", condensations),
        ):
            numbers[name], exact[name] = _rows(conn, table)
    return {**numbers, "exact": exact, "view_sizes": None, "events_by_kind": None}
