"""The projector: stored projection state + new events -> the row changes of one append.

Pure: it never touches SQL. The store hands it the conversation's carried state (and, only when
the batch holds a condensation, the current view entries and open index positions), and writes
back exactly what it returns. A plain append therefore costs O(1) rows whatever the history
length: one view entry, at most one index closed and one opened. A condensation rewrites only
what it changed.

Rows carry their lifetime in seqs (``entered_seq``/``left_seq`` for entries, ``from_seq``/
``to_seq`` for indices), so the live view right after any event N is the set of rows alive at N.
A row born and closed at the same seq was never visible and is not written at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from viewstore.domain.kinds import Role
from viewstore.domain.order_key import key_between, seq_key
from viewstore.domain.view import IndexTracker, TrackerState, forget, summary_position

if TYPE_CHECKING:
    from viewstore.domain.events import Event


@dataclass(frozen=True)
class ProjectionState:
    """Everything about a conversation's live view that an O(1) append needs."""

    version: int = 0
    unhandled_request: bool = False
    tracker: TrackerState = field(default_factory=TrackerState)


@dataclass(frozen=True)
class ViewEntry:
    """One row of the view: an event (or a synthesized summary) and when it was in view."""

    order_key: str
    id: str
    seq: int
    kind: str
    role: Role
    tool_call_id: str | None
    llm_response_id: str | None
    thinking: bool
    entered_seq: int
    left_seq: int | None = None
    # Copies of the event, so reading a view never goes back to the log. ``payload`` is None
    # only on entries loaded for a condensation, which are never written back.
    payload: str | None = None
    source: str | None = None
    timestamp: str | None = None
    parent_id: str | None = None
    is_summary: bool = False  # synthesized by a condensation, not an event of the log


@dataclass(frozen=True)
class IndexRow:
    position: int
    from_seq: int
    to_seq: int | None = None


@dataclass
class Projection:
    """The row changes of one append (or of a rebuild from an empty state)."""

    state: ProjectionState
    new_entries: list[ViewEntry] = field(default_factory=list)
    closed_entries: dict[str, int] = field(default_factory=dict)  # order_key -> left_seq
    new_indices: list[IndexRow] = field(default_factory=list)
    closed_indices: dict[int, int] = field(default_factory=dict)  # position -> to_seq
    # For each condensation seq, the ids it really removed from the view.
    forgotten: dict[int, set[str]] = field(default_factory=dict)

    @property
    def rows_written(self) -> int:
        return (
            len(self.new_entries)
            + len(self.closed_entries)
            + len(self.new_indices)
            + len(self.closed_indices)
        )


def entry_for(event: Event, seq: int, order_key: str, *, is_summary: bool = False) -> ViewEntry:
    return ViewEntry(
        order_key=order_key,
        id=event.id,
        seq=seq,
        kind=event.kind,
        role=event.role,
        tool_call_id=event.tool_call_id,
        llm_response_id=event.llm_response_id,
        thinking=event.thinking,
        entered_seq=seq,
        payload=event.payload_json,
        source=event.source,
        timestamp=event.timestamp,
        parent_id=event.parent_id,
        is_summary=is_summary,
    )


class _Batch:
    """Bookkeeping while one batch is projected; rows of this batch are still mutable."""

    def __init__(
        self,
        state: ProjectionState,
        view: list[ViewEntry] | None,
        open_indices: set[int] | None,
    ) -> None:
        self.version = state.version
        self.unhandled = state.unhandled_request
        self.tracker = IndexTracker(state.tracker)
        self.view = view
        self.open_indices = open_indices
        self.new_entries: dict[str, ViewEntry] = {}
        self.closed_entries: dict[str, int] = {}
        self.new_indices: dict[int, IndexRow] = {}  # open or closed rows born in this batch
        self.finished_indices: list[IndexRow] = []
        self.closed_indices: dict[int, int] = {}
        self.forgotten: dict[int, set[str]] = {}

    # -- indices ----------------------------------------------------------------------

    def open_index(self, position: int, seq: int) -> None:
        self.new_indices[position] = IndexRow(position, seq)
        if self.open_indices is not None:
            self.open_indices.add(position)

    def close_index(self, position: int, seq: int) -> None:
        if self.open_indices is not None:
            self.open_indices.discard(position)
        born = self.new_indices.pop(position, None)
        if born is None:
            self.closed_indices[position] = seq
        elif born.from_seq != seq:
            self.finished_indices.append(replace(born, to_seq=seq))

    # -- entries ----------------------------------------------------------------------

    def add_entry(self, entry: ViewEntry, position: int | None = None) -> None:
        self.new_entries[entry.order_key] = entry
        if self.view is not None:
            if position is None:
                self.view.append(entry)
            else:
                self.view.insert(position, entry)

    def close_entry(self, entry: ViewEntry, seq: int) -> None:
        self.forgotten.setdefault(seq, set()).add(entry.id)
        born = self.new_entries.get(entry.order_key)
        if born is None:
            self.closed_entries[entry.order_key] = seq
        else:
            self.new_entries[entry.order_key] = replace(born, left_seq=seq)

    # -- events -----------------------------------------------------------------------

    def apply(self, event: Event, seq: int) -> None:
        self.version = seq
        if event.role is Role.CONDENSATION:
            self.condense(event, seq)
        elif event.role is Role.REQUEST:
            self.unhandled = True
        elif event.is_llm_convertible:
            self.add_entry(entry_for(event, seq, seq_key(seq)))
            delta = self.tracker.append(event)
            if delta.removed is not None:
                self.close_index(delta.removed, seq)
            if delta.added is not None:
                self.open_index(delta.added, seq)

    def condense(self, condensation: Event, seq: int) -> None:
        if self.view is None or self.open_indices is None:
            raise RuntimeError("a condensation needs the current view; load it first")
        self.unhandled = False
        kept = forget(self.view, condensation)
        if len(kept) != len(self.view):
            kept_keys = {entry.order_key for entry in kept}
            for entry in self.view:
                if entry.order_key not in kept_keys:
                    self.close_entry(entry, seq)
        self.view = kept
        position = summary_position(condensation, len(kept))
        if position is not None:
            from viewstore.domain.events import summary_event  # noqa: PLC0415 - start-up time (viewstore.domain.kinds)

            summary = summary_event(condensation)
            key = self.key_at(kept, position, seq)
            self.add_entry(entry_for(summary, seq, key, is_summary=True), position)
        self.tracker, indices = IndexTracker.scan(self.view)
        for gone in sorted(self.open_indices - indices):
            self.close_index(gone, seq)
        for new in sorted(indices - self.open_indices):
            self.open_index(new, seq)

    @staticmethod
    def key_at(view: Sequence[ViewEntry], position: int, seq: int) -> str:
        """A key that sorts at ``position`` of ``view``."""
        if position == len(view):
            return seq_key(seq)
        lower = view[position - 1].order_key if position > 0 else ""
        return key_between(lower, view[position].order_key, seq)

    def result(self) -> Projection:
        state = ProjectionState(
            version=self.version, unhandled_request=self.unhandled, tracker=self.tracker.state()
        )
        return Projection(
            state=state,
            new_entries=sorted(self.new_entries.values(), key=lambda e: e.order_key),
            closed_entries=self.closed_entries,
            new_indices=self.finished_indices + list(self.new_indices.values()),
            closed_indices=self.closed_indices,
            forgotten=self.forgotten,
        )


def project(
    state: ProjectionState,
    events: Iterable[tuple[int, Event]],
    *,
    view: Sequence[ViewEntry] | None = None,
    open_indices: Iterable[int] | None = None,
) -> Projection:
    """Project ``(seq, event)`` pairs on top of ``state``.

    ``view`` (the current entries in order) and ``open_indices`` are needed only when the batch
    holds a condensation; :func:`needs_view` tells the caller whether to load them.
    """
    batch = _Batch(
        state,
        None if view is None else list(view),
        None if open_indices is None else set(open_indices),
    )
    if state.version == 0:
        # A new conversation: its empty view already has index 0, visible as of seq 0.
        batch.open_index(0, 0)
    for seq, event in events:
        batch.apply(event, seq)
    return batch.result()


def needs_view(events: Iterable[Event]) -> bool:
    return any(event.role is Role.CONDENSATION for event in events)


def project_from_scratch(events: Iterable[tuple[int, Event]]) -> Projection:
    """Every row a conversation's log should have produced: what ``verify``/``rebuild`` use."""
    return project(ProjectionState(), events, view=[], open_indices=set())
