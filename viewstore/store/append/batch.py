"""What an append accepts: batches of events, parsed and checked before any SQL."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from sqlalchemy import String

from viewstore.domain.errors import InvalidArgumentError, InvalidEventError
from viewstore.domain.events import Event, Role, parse_event
from viewstore.store.database.schema import condensation_forgotten, events, view_entries

# BaseModel: an OpenHands SDK event object, stored as the SDK writes it (see parse_event).
EventInput = Event | BaseModel | dict[str, Any] | str | bytes


# Fields copied into columns of their own. PostgreSQL text cannot hold NUL (SQLite can), so
# such an event is rejected on every backend alike; NUL elsewhere in a payload is kept exactly.
_COLUMN_FIELDS = ("kind", "source", "timestamp", "parent_id", "tool_call_id", "llm_response_id")


def _reject_nul_in_columns(event: Event, index: int) -> None:
    for name in _COLUMN_FIELDS:
        value = getattr(event, name)
        if value is not None and "\x00" in value:
            raise InvalidEventError(
                "must not contain a NUL character",
                kind=event.kind,
                event_id=event.id,
                field=name,
                index=index,
            )
    if any("\x00" in forgotten for forgotten in event.forgotten_event_ids):
        raise InvalidEventError(
            "must not contain an id with a NUL character",
            kind=event.kind,
            event_id=event.id,
            field="forgotten_event_ids",
            index=index,
        )


def _limit(column: Any) -> int:
    column_type = column.type
    assert isinstance(column_type, String) and column_type.length is not None
    return column_type.length


# Every event field stored in a bounded (VARCHAR(n)) column, with its column's limit. A limit is
# checked here, before any write, rather than left to the database: SQLite stores any length,
# PostgreSQL refuses an over-long value on the ordinary path but an explicit cast (as the fast
# path's single statement needs) silently truncates it. Checked here, both paths and both
# backends accept exactly the same events, and storage never sees a value it could cut.
#
# Why limits rather than unbounded columns (a migration to TEXT): the limits are far above
# anything OpenHands writes (ISO timestamps, class names, short source tags, ids), PostgreSQL's
# ordinary path already refused every value they refuse, so no event a PostgreSQL store ever
# accepted is newly refused; and widening the columns would copy every table of a SQLite
# database (batch migration) for no event anyone produces. Stored events are never re-checked
# (rebuild and reads parse the log without these limits).
_BOUNDED_FIELDS = (
    ("kind", _limit(events.c.kind)),
    ("kind", _limit(view_entries.c.kind)),
    ("source", _limit(events.c.source)),
    ("source", _limit(view_entries.c.source)),
    ("timestamp", _limit(events.c.timestamp)),
    ("timestamp", _limit(view_entries.c.timestamp)),
    ("parent_id", _limit(events.c.parent_id)),
    ("parent_id", _limit(view_entries.c.parent_id)),
    ("id", _limit(events.c.event_id)),
)
_FORGOTTEN_ID_LIMIT = _limit(condensation_forgotten.c.event_id)
_VIEW_ID_LIMIT = _limit(view_entries.c.event_id)


def _check_lengths(event: Event, index: int) -> None:
    def refuse(field: str, length: int, limit: int, what: str = "") -> InvalidEventError:
        # An over-long kind is named by its start only: the message must stay one line.
        kind = event.kind if len(event.kind) <= 80 else event.kind[:40] + "..."
        return InvalidEventError(
            f"{what}is {length} characters long, the limit is {limit}",
            kind=kind,
            event_id=event.id,
            field=field,
            index=index,
        )

    for name, limit in _BOUNDED_FIELDS:
        value = getattr(event, name)
        if value is not None and len(value) > limit:
            raise refuse(name, len(value), limit)
    longest = max(event.forgotten_event_ids, key=len, default="")
    if len(longest) > _FORGOTTEN_ID_LIMIT:
        raise refuse("forgotten_event_ids", len(longest), _FORGOTTEN_ID_LIMIT, "holds an id that ")
    # A condensation's summary enters the view rows under the id "<id>-summary".
    if event.role is Role.CONDENSATION and event.inserts_summary:
        length = len(event.summary_id)
        if length > _VIEW_ID_LIMIT:
            raise refuse("id", length, _VIEW_ID_LIMIT, "names a summary whose id ")


def _event_input(raw: object, max_bytes: int) -> Event:
    """An event to append. An ``Event`` object is checked again from its ``payload_json``
    (whoever built it may have skipped ``parse_event``): a payload that is not JSON, too deep,
    or not UTF-8 would otherwise be stored, and fields that disagree with it would make the
    rows differ from a replay."""
    if not isinstance(raw, Event):
        return parse_event(raw, max_bytes=max_bytes)  # type: ignore[arg-type]
    event = parse_event(raw.payload_json, max_bytes=max_bytes)
    differing = [
        name
        for name in Event.model_fields
        if name != "payload_json" and getattr(raw, name, None) != getattr(event, name)
    ]
    if differing:
        raise InvalidEventError(
            f"the Event's fields {', '.join(differing)} differ from its payload_json "
            "(build Events with parse_event)",
            kind=event.kind,
            event_id=event.id,
        )
    return event


def parse_batch(events: EventInput | Iterable[EventInput], max_bytes: int) -> list[Event]:
    """Parse and check one append's events; the first bad one raises, naming its position."""
    if isinstance(events, BaseModel | dict | str | bytes | bytearray):
        events = [events]
    elif not isinstance(events, Iterable):
        raise InvalidArgumentError(
            f"events must be an event or an iterable of events, got {type(events).__name__}"
        )
    parsed: list[Event] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(events):
        try:
            event = _event_input(raw, max_bytes)
        except InvalidEventError as error:
            raise error.at_index(index) from error
        _reject_nul_in_columns(event, index)
        _check_lengths(event, index)
        if event.id in seen:
            raise InvalidEventError(
                f"appears twice in one batch (first at #{seen[event.id]})",
                kind=event.kind,
                event_id=event.id,
                field="id",
                index=index,
            )
        seen[event.id] = index
        parsed.append(event)
    return parsed
