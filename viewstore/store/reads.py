"""Read queries: the materialized view (current or as of a seq), and the log itself.

Reading a view never replays the log: it selects the view rows alive at the requested seq, in
key order, joined to their payloads, and the index rows alive at that seq.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Row, func, select

from viewstore.errors import ConversationNotFoundError
from viewstore.events import Event, Role
from viewstore.store.records import StoredEvent, StoredView
from viewstore.store.rows import alive_at
from viewstore.store.schema import conversations, events, manipulation_indices, view_entries


def conversation_row(conn: Connection, conversation_id: str) -> Row[Any]:
    row = conn.execute(select(conversations).where(conversations.c.id == conversation_id)).first()
    if row is None:
        raise ConversationNotFoundError(conversation_id)
    return row


_ROLES = {role.value: role for role in Role}


def _event_from_view_row(row: Any) -> Event:
    (event_id, kind, role, tool_call_id, llm_response_id, thinking, summary_payload,
     payload, source, timestamp, parent_id) = row  # fmt: skip
    summary = None
    if summary_payload is not None:
        payload = summary_payload
        summary = json.loads(payload).get("summary")
        parent_id = None
    # Rows were validated when appended; rebuilding the envelope skips a second validation.
    return Event.trusted(
        kind=kind,
        id=event_id,
        role=_ROLES[role],
        known_kind=True,
        source=source,
        timestamp=timestamp,
        parent_id=parent_id,
        tool_call_id=tool_call_id,
        llm_response_id=llm_response_id,
        thinking=bool(thinking),
        forgotten_event_ids=frozenset(),
        summary=summary,
        summary_offset=None,
        payload_json=payload,
    )


def read_view(conn: Connection, conversation_id: str, as_of: int | None) -> StoredView:
    conv = conversation_row(conn, conversation_id)
    entries = (
        select(
            view_entries.c.event_id,
            view_entries.c.kind,
            view_entries.c.role,
            view_entries.c.tool_call_id,
            view_entries.c.llm_response_id,
            view_entries.c.thinking,
            view_entries.c.summary_payload,
            events.c.payload,
            events.c.source,
            events.c.timestamp,
            events.c.parent_id,
        )
        .join(
            events,
            (events.c.conversation_id == view_entries.c.conversation_id)
            & (events.c.seq == view_entries.c.seq),
        )
        .where(view_entries.c.conversation_id == conversation_id)
        .order_by(view_entries.c.order_key)
    )
    indices = (
        select(manipulation_indices.c.position)
        .where(manipulation_indices.c.conversation_id == conversation_id)
        .order_by(manipulation_indices.c.position)
    )
    if as_of is None:
        entries = entries.where(view_entries.c.left_seq.is_(None))
        indices = indices.where(manipulation_indices.c.to_seq.is_(None))
        version, unhandled = conv.version, conv.unhandled_request
    else:
        entries = entries.where(
            alive_at(view_entries.c.entered_seq, view_entries.c.left_seq, as_of)
        )
        indices = indices.where(
            alive_at(manipulation_indices.c.from_seq, manipulation_indices.c.to_seq, as_of)
        )
        version, unhandled = as_of, _unhandled_as_of(conn, conversation_id, as_of)
    return StoredView(
        conversation_id=conversation_id,
        version=version,
        events=[_event_from_view_row(row) for row in conn.execute(entries)],
        manipulation_indices=[row.position for row in conn.execute(indices)],
        unhandled_condensation_request=unhandled,
        as_of=as_of,
    )


def _unhandled_as_of(conn: Connection, conversation_id: str, seq: int) -> bool:
    """The request flag right after ``seq``: is the last request newer than the last
    condensation? Two index lookups on (conversation_id, kind, seq)."""

    def last(kind: str) -> int:
        value = conn.execute(
            select(func.max(events.c.seq)).where(
                events.c.conversation_id == conversation_id,
                events.c.kind == kind,
                events.c.seq <= seq,
            )
        ).scalar_one()
        return int(value or 0)

    return last("CondensationRequest") > last("Condensation")


def read_events(
    conn: Connection,
    conversation_id: str,
    *,
    after: int = 0,
    limit: int | None = None,
    upto: int | None = None,
) -> list[StoredEvent]:
    conversation_row(conn, conversation_id)
    query = (
        select(
            events.c.seq,
            events.c.event_id,
            events.c.kind,
            events.c.payload,
            events.c.recorded_at,
            events.c.hash,
        )
        .where(events.c.conversation_id == conversation_id, events.c.seq > after)
        .order_by(events.c.seq)
    )
    if upto is not None:
        query = query.where(events.c.seq <= upto)
    if limit is not None:
        query = query.limit(limit)
    return [
        StoredEvent(
            conversation_id=conversation_id,
            seq=row.seq,
            event_id=row.event_id,
            kind=row.kind,
            payload_json=row.payload,
            recorded_at=_aware(row.recorded_at),
            hash=row.hash,
        )
        for row in conn.execute(query)
    ]


def _aware(value: datetime) -> datetime:
    """SQLite keeps no offset: its timestamps were written in UTC, so say so."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def conversation_ids(conn: Connection) -> list[str]:
    return [row.id for row in conn.execute(select(conversations.c.id).order_by(conversations.c.id))]
