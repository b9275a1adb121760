"""The OpenHands ``View``: the events sent to the LLM, on both of OpenHands' paths.

``append_event`` is the live path (docs/semantics.md §3): what a long-running agent holds in memory,
with no enforcement. ``View.from_events`` is the resume path (docs/semantics.md §5): the same fold,
then enforcement of every property to a fixpoint. Manipulation indices are kept up to date on
every append, so reading them costs nothing; only a condensation rescans the view.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from viewstore.domain.kinds import Role
from viewstore.domain.view.condense import condense
from viewstore.domain.view.enforcement import EnforcementRound, enforce_properties
from viewstore.domain.view.incremental import IndexTracker, TrackerState
from viewstore.domain.view.indices import ManipulationIndices

if TYPE_CHECKING:
    from viewstore.domain.events import Event

    EventLike: TypeAlias = Event | dict[str, object] | str | bytes


class View:
    def __init__(self) -> None:
        self._events: list[Event] = []
        self._unhandled = False
        self._tracker = IndexTracker()
        self._indices: set[int] = {0}
        self.enforcement_rounds: list[EnforcementRound] = []

    # -- reading -------------------------------------------------------------------------

    @property
    def events(self) -> list[Event]:
        return list(self._events)

    @property
    def event_ids(self) -> list[str]:
        return [event.id for event in self._events]

    @property
    def unhandled_condensation_request(self) -> bool:
        return self._unhandled

    @property
    def manipulation_indices(self) -> ManipulationIndices:
        return ManipulationIndices(self._indices)

    @property
    def tracker_state(self) -> TrackerState:
        """The carried index state, for a store to persist and resume from."""
        return self._tracker.state()

    def __len__(self) -> int:
        return len(self._events)

    # -- the live path -------------------------------------------------------------------

    def append_event(self, event: EventLike) -> None:
        # The events model (pydantic) is imported on first use: see viewstore.domain.kinds.
        from viewstore.domain.events import parse_event, summary_event  # noqa: PLC0415 - start-up time (viewstore.domain.kinds)

        event = parse_event(event)
        if event.role is Role.CONDENSATION:
            self._events = condense(self._events, event, summary_event(event))
            self._unhandled = False
            self._rescan()
        elif event.role is Role.REQUEST:
            self._unhandled = True
        elif event.is_llm_convertible:
            self._events.append(event)
            delta = self._tracker.append(event)
            if delta.removed is not None:
                self._indices.discard(delta.removed)
            if delta.added is not None:
                self._indices.add(delta.added)

    def _rescan(self) -> None:
        self._tracker, self._indices = IndexTracker.scan(self._events)

    # -- the resume path -----------------------------------------------------------------

    @classmethod
    def from_events(cls, events: Iterable[EventLike]) -> View:
        """Fold ``append_event`` over ``events``, then enforce every property to a fixpoint."""
        from viewstore.domain.events import parse_event  # noqa: PLC0415 - start-up time (viewstore.domain.kinds)

        stream = [parse_event(event) for event in events]
        view = cls()
        for event in stream:
            view.append_event(event)
        view.enforce(stream)
        return view

    def enforce(self, all_events: Sequence[Event]) -> None:
        """Enforce the properties against ``all_events`` (the request flag is untouched)."""
        self._events, self.enforcement_rounds = enforce_properties(self._events, all_events)
        if self.enforcement_rounds:
            self._rescan()
