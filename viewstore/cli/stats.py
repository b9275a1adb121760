"""Store-wide counts for ``viewstore stats`` (one read transaction)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from viewstore.store import EventStore
from viewstore.store.schema import condensations, conversations, events, view_entries
from viewstore.store.translate import translated


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
