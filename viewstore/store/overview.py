"""Reads for browsing: a conversation's condensations, what forgot an event, one
event by id. Each reads rows the store already keeps; none replays the log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select

from viewstore.store.reads import aware, conversation_row
from viewstore.store.records import (
    CondensationRecord,
    StoredEvent,
)
from viewstore.store.schema import condensation_forgotten, condensations, events


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
