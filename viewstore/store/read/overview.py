"""Reads for browsing: a conversation's condensations, what forgot an event, one
event by id. Each reads rows the store already keeps; none replays the log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select

from viewstore.store.database.schema import condensation_forgotten, condensations, events
from viewstore.store.read import lineage
from viewstore.store.read.reads import aware, conversation_row
from viewstore.store.records import (
    CondensationRecord,
    StoredEvent,
)


def _parts(
    conn: Connection, conversation_id: str, upto: int | None
) -> list[tuple[str, int, int | None]]:
    """Each conversation of the lineage (a fork's sources first) with the seqs of it to read:
    after the first number, through the second (None: to the end)."""
    row = conversation_row(conn, conversation_id)
    parts = []
    for segment in lineage.segments(conn, row):
        bounds = segment.clamp(0, upto)
        if bounds is not None:
            parts.append((segment.conversation_id, *bounds))
    return parts


def _within(column: Any, after: int, upto: int | None) -> Any:
    return column > after if upto is None else column.between(after + 1, upto)


def condensation_records(
    conn: Connection, conversation_id: str, *, upto: int | None, seq: int | None = None
) -> list[CondensationRecord]:
    """The conversation's condensations (those at or before ``upto``, or only the one at
    ``seq``) with what each forgot."""
    found: list[CondensationRecord] = []
    for owner, after, through in _parts(conn, conversation_id, upto):
        query = select(condensations).where(
            condensations.c.conversation_id == owner, _within(condensations.c.seq, after, through)
        )
        forgotten = select(condensation_forgotten).where(
            condensation_forgotten.c.conversation_id == owner,
            _within(condensation_forgotten.c.seq, after, through),
        )
        if seq is not None:
            query = query.where(condensations.c.seq == seq)
            forgotten = forgotten.where(condensation_forgotten.c.seq == seq)
        by_seq: dict[int, list[tuple[str, bool]]] = {}
        for row in conn.execute(forgotten):
            by_seq.setdefault(row.seq, []).append((row.event_id, bool(row.was_in_view)))
        found.extend(
            CondensationRecord(
                seq=row.seq,
                event_id=row.event_id,
                summary=row.summary,
                summary_offset=row.summary_offset,
                forgotten=tuple(by_seq.get(row.seq, ())),
            )
            for row in conn.execute(query.order_by(condensations.c.seq))
        )
    return found


def forgotten_by(
    conn: Connection, conversation_id: str, event_ids: Sequence[str], *, upto: int | None
) -> dict[str, int]:
    """For each of ``event_ids`` that a condensation forgot (at or before ``upto``): the seq of
    the first one that did. One lookup per id in the forgotten rows' event-id index."""
    table = condensation_forgotten
    found: dict[str, int] = {}
    for owner, after, through in _parts(conn, conversation_id, upto):
        query = (
            select(table.c.event_id, func.min(table.c.seq))
            .where(
                table.c.conversation_id == owner,
                table.c.event_id.in_(event_ids),
                _within(table.c.seq, after, through),
            )
            .group_by(table.c.event_id)
        )
        for event_id, seq in conn.execute(query):
            found.setdefault(event_id, int(seq))  # the sources come first: theirs is older
    return found


def event_by_id(conn: Connection, conversation_id: str, event_id: str) -> StoredEvent | None:
    for owner, after, through in _parts(conn, conversation_id, None):
        row = conn.execute(
            select(events).where(
                events.c.conversation_id == owner,
                events.c.event_id == event_id,
                _within(events.c.seq, after, through),
            )
        ).first()
        if row is not None:
            return _stored_event(conversation_id, row)
    return None


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
