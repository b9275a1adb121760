"""The events of a stored view, rebuilt lazily from the rows that carry them.

A view read fetches two columns per entry: the event's exact payload, and its *envelope*: the
event id, then (after a U+001F, which no event id may contain) the fields the view logic reads
as one JSON array. A summary's row stores its envelope; for an event's row the read packs it in
SQL from the row's and the log's columns (``packed_envelope``), so it is not stored twice. Not
a column per field: through the SQLite driver each result column costs
0.1 to 0.2 µs per row whatever it holds. Reading a 10,000-event view cost about 1.6x a bare
``SELECT payload`` of the same rows with the fields as columns of their own, 1.2x with only the
id in a column of its own, and 1.1x packed as here.

:class:`StoredEvents` keeps those rows and builds each :class:`Event` the first time its position
is read: a caller that wants only the ids or the payloads (an agent building its next prompt)
never pays for thousands of Event objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, overload

from viewstore.events import KIND_ROLES, SUMMARY_KIND, Event, Role, canonical_json
from viewstore.projector import ViewEntry

#: One fetched row: envelope, payload JSON.
EventRow = tuple[str, str]

SEPARATOR = "\x1f"  # control characters are not allowed in event ids (viewstore.events)

_ROLES = {role.value: role for role in Role}
# json.loads spends more on its argument checks than on parsing a short array: 1.9 µs against
# 0.7 µs per envelope, a quarter of building a 10,000-event view's Events.
_decode = json.JSONDecoder().raw_decode


def envelope(entry: ViewEntry) -> str:
    """The envelope of a view entry, as a read fetches it; ``event_from_row`` reads it back."""
    return pack(
        entry.id,
        entry.kind,
        entry.role.value,
        entry.source,
        entry.timestamp,
        entry.parent_id,
        entry.tool_call_id,
        entry.llm_response_id,
        entry.thinking,
    )


def pack(event_id: str, *fields: Any) -> str:
    """The event id and the fields (kind, role, source, timestamp, parent id, tool call id,
    LLM response id, thinking) as one envelope text."""
    return event_id + SEPARATOR + canonical_json(list(fields))


# The envelope packed in SQL, from the columns of a view row (``row``) and of its event's log
# row (``log``: source, timestamp and parent id, which an event's view row does not hold). Its
# JSON may differ from ``pack``'s in spacing only; ``event_from_row`` reads either. A
# PostgreSQL ``::`` cast would collide with the ``:name`` parameters, hence CAST.
_PACKED_SQL = {
    "sqlite": (
        "{r}.event_id || char(31) || '[' || json_quote({r}.kind) || ',' || json_quote({r}.role)"
        " || ',' || json_quote({e}.source) || ',' || json_quote({e}.timestamp) || ','"
        " || json_quote({e}.parent_id) || ',' || json_quote({r}.tool_call_id) || ','"
        " || json_quote({r}.llm_response_id) || ','"
        " || CASE WHEN {r}.thinking THEN 'true' ELSE 'false' END || ']'"
    ),
    "postgresql": (
        "{r}.event_id || chr(31) || CAST(json_build_array({r}.kind, {r}.role, {e}.source,"
        " {e}.timestamp, {e}.parent_id, {r}.tool_call_id, {r}.llm_response_id, {r}.thinking)"
        " AS text)"
    ),
}


def packed_envelope(dialect: str, *, row: str, log: str) -> str:
    """SQL: the envelope of an event's view row ``row``, whose event is the log's row ``log``
    (revision 0023: the row stores none)."""
    return _PACKED_SQL[dialect].format(r=row, e=log)


def event_from_row(row: EventRow | Sequence[Any]) -> Event:
    head, payload = row
    event_id, _, packed = head.partition(SEPARATOR)
    fields, _ = _decode(packed)
    kind, role, source, timestamp, parent_id, tool_call_id, llm_response_id, thinking = fields
    # A summary's text is a field of the Event too; summaries are few, so parse only those.
    summary = json.loads(payload).get("summary") if kind == SUMMARY_KIND else None
    # Validated when appended: rebuilding skips a second validation (see Event.trusted).
    return Event.trusted(
        kind=kind,
        id=event_id,
        role=_ROLES[role],
        known_kind=kind in KIND_ROLES,
        source=source,
        timestamp=timestamp,
        parent_id=parent_id,
        tool_call_id=tool_call_id,
        llm_response_id=llm_response_id,
        thinking=thinking,
        forgotten_event_ids=frozenset(),
        summary=summary,
        summary_offset=None,
        payload_json=payload,
    )


class StoredEvents(Sequence[Event]):
    """An immutable sequence of a view's events, each built on first access and then kept.

    Behaves as a read-only list: ``len``, indexing, iteration, and ``==`` with any sequence of
    events (a list, another view's events). A slice is a new ``list`` of the events in it.
    """

    __slots__ = ("_events", "_rows")

    def __init__(self, rows: Sequence[EventRow | Sequence[Any]]) -> None:
        self._rows = rows
        self._events: list[Event | None] = [None] * len(rows)

    def ids(self) -> list[str]:
        return [row[0].partition(SEPARATOR)[0] for row in self._rows]

    def payloads(self) -> list[str]:
        return [row[1] for row in self._rows]

    def at(self, positions: Sequence[int]) -> StoredEvents:
        """The events at these positions (nothing parsed)."""
        return StoredEvents([self._rows[i] for i in positions])

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self._event(i) for i in range(*index.indices(len(self._rows)))]
        return self._event(index)

    def _event(self, index: int) -> Event:
        event = self._events[index]  # IndexError and negative indices: as a list's
        if event is None:
            event = self._events[index] = event_from_row(self._rows[index])
        return event

    def __iter__(self) -> Iterator[Event]:
        for index in range(len(self._rows)):
            yield self._event(index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes | bytearray):
            return NotImplemented
        if isinstance(other, StoredEvents) and other._rows == self._rows:
            return True
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # compares equal to lists, which are unhashable

    def __repr__(self) -> str:
        return f"StoredEvents({list(self)!r})"
