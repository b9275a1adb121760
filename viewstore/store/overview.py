"""Reads for browsing: a page of conversation summaries, a conversation's condensations, one
event by id. Each reads rows the store already keeps; none replays the log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, select

from viewstore.store.reads import aware, conversation_row
from viewstore.store.records import (
    CondensationRecord,
    ConversationSummary,
    StoredEvent,
)
from viewstore.store.schema import condensation_forgotten, condensations, conversations, events

#: Sort keys a summary page may be ordered by (the column each names).
SORTS = {
    "id": conversations.c.id,
    "updated": conversations.c.updated_at,
    "created": conversations.c.created_at,
    "events": conversations.c.version,
    "view": conversations.c.view_length,
}


def summaries(
    conn: Connection,
    *,
    search: str,
    sort: str,
    descending: bool,
    offset: int,
    limit: int,
) -> tuple[int, list[ConversationSummary]]:
    """The total matching ``search`` (a substring of the id) and one page of them."""
    where = conversations.c.id.contains(search, autoescape=True) if search else and_(True)
    total = conn.execute(select(func.count()).select_from(conversations).where(where)).scalar()
    column = SORTS[sort]
    order = [column.desc() if descending else column.asc(), conversations.c.id.asc()]
    rows = conn.execute(
        select(conversations).where(where).order_by(*order).offset(offset).limit(limit)
    )
    return int(total or 0), [
        ConversationSummary(
            conversation_id=row.id,
            created_at=aware(row.created_at),
            updated_at=aware(row.updated_at),
            version=row.version,
            view_length=row.view_length,
            unhandled_condensation_request=bool(row.unhandled_request),
        )
        for row in rows
    ]


def condensation_records(
    conn: Connection, conversation_id: str, *, upto: int | None, seq: int | None = None
) -> list[CondensationRecord]:
    """The conversation's condensations (those at or before ``upto``, or only the one at
    ``seq``) with what each forgot."""
    conversation_row(conn, conversation_id)
    query = select(condensations).where(condensations.c.conversation_id == conversation_id)
    forgotten = select(condensation_forgotten).where(
        condensation_forgotten.c.conversation_id == conversation_id
    )
    if upto is not None:
        query = query.where(condensations.c.seq <= upto)
        forgotten = forgotten.where(condensation_forgotten.c.seq <= upto)
    if seq is not None:
        query = query.where(condensations.c.seq == seq)
        forgotten = forgotten.where(condensation_forgotten.c.seq == seq)
    by_seq: dict[int, list[tuple[str, bool]]] = {}
    for row in conn.execute(forgotten):
        by_seq.setdefault(row.seq, []).append((row.event_id, bool(row.was_in_view)))
    return [
        CondensationRecord(
            seq=row.seq,
            event_id=row.event_id,
            summary=row.summary,
            summary_offset=row.summary_offset,
            forgotten=tuple(by_seq.get(row.seq, ())),
        )
        for row in conn.execute(query.order_by(condensations.c.seq))
    ]


def forgotten_by(
    conn: Connection, conversation_id: str, event_ids: Sequence[str], *, upto: int | None
) -> dict[str, int]:
    """For each of ``event_ids`` that a condensation forgot (at or before ``upto``): the seq of
    the first one that did. One lookup per id in the forgotten rows' event-id index."""
    conversation_row(conn, conversation_id)
    table = condensation_forgotten
    query = (
        select(table.c.event_id, func.min(table.c.seq))
        .where(table.c.conversation_id == conversation_id, table.c.event_id.in_(event_ids))
        .group_by(table.c.event_id)
    )
    if upto is not None:
        query = query.where(table.c.seq <= upto)
    return {event_id: int(seq) for event_id, seq in conn.execute(query)}


def event_by_id(conn: Connection, conversation_id: str, event_id: str) -> StoredEvent | None:
    conversation_row(conn, conversation_id)
    row = conn.execute(
        select(events).where(
            events.c.conversation_id == conversation_id, events.c.event_id == event_id
        )
    ).first()
    return None if row is None else _stored_event(conversation_id, row)


def _stored_event(conversation_id: str, row: Any) -> StoredEvent:
    return StoredEvent(
        conversation_id=conversation_id,
        seq=row.seq,
        event_id=row.event_id,
        kind=row.kind,
        payload_json=row.payload,
        recorded_at=aware(row.recorded_at),
        hash=row.hash,
    )


def check_page(sort: str, offset: int, limit: int) -> Sequence[str]:
    """What is wrong with a page request (empty: nothing)."""
    problems = []
    if sort not in SORTS:
        problems.append(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        problems.append(f"offset must be a non-negative integer, got {offset!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        problems.append(f"limit must be an integer from 1 to 1000, got {limit!r}")
    return problems
