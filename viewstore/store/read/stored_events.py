"""The events of a stored view, rebuilt lazily from the rows that carry them.

A view read fetches two columns per entry: the event id and the event's exact payload (the
log's, joined on its primary key; a summary's, its row's). Each further result column costs
0.1 to 0.2 µs a row through the SQLite driver, and packing the fields in SQL cost more than
that (docs/schema.md measures both), so a read fetches nothing else.

:class:`StoredEvents` keeps those rows and builds each :class:`Event` the first time its position
is read, from its payload, where every field of it is: a caller that wants only the ids or the
payloads (an agent building its next prompt, the OpenHands adapter, the viewer) never parses a
payload or builds an Event.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from viewstore.domain.events import Event

#: One fetched row: event id, payload JSON.
EventRow = tuple[str, str]


def event_from_row(row: EventRow | Sequence[Any]) -> Event:
    """The Event of a fetched row (``viewstore.domain.events.stored_event``)."""
    from viewstore.domain.events import stored_event  # noqa: PLC0415 - start-up time (viewstore.domain.kinds)

    event_id, payload = row
    return stored_event(event_id, payload)


class StoredEvents(Sequence["Event"]):
    """An immutable sequence of a view's events, each built on first access and then kept.

    Behaves as a read-only list: ``len``, indexing, iteration, and ``==`` with any sequence of
    events (a list, another view's events). A slice is a new ``list`` of the events in it.
    """

    __slots__ = ("_events", "_rows")

    def __init__(self, rows: Sequence[EventRow | Sequence[Any]]) -> None:
        self._rows = rows
        self._events: list[Event | None] = [None] * len(rows)

    def ids(self) -> list[str]:
        return [row[0] for row in self._rows]

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
