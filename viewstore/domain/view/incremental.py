"""Manipulation indices maintained one append at a time.

Appending event ``e`` at position ``n`` can only remove index ``n`` (the gap before ``e``) and
add index ``n + 1`` (the end): whether ``n`` survives depends on ``e`` and a little carried
state (the previous event's batch, whether a tool loop is open), and whether ``n + 1`` exists
depends on the pending tool-call ids after ``e``. So a plain append is O(1); only a condensation,
which rewrites the view, needs a rescan. :class:`TrackerState` is that carried state, exposed so
the store can persist it beside the view rows and resume from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from viewstore.domain.view.item import ViewItem, is_action
from viewstore.domain.view.properties import ALL_PROPERTIES
from viewstore.domain.view.properties.batch_atomicity import splits_batch
from viewstore.domain.view.properties.tool_call_matching import track_pending
from viewstore.domain.view.properties.tool_loop_atomicity import loop_step


@dataclass(frozen=True)
class TrackerState:
    length: int = 0
    pending: frozenset[str | None] = frozenset()
    in_loop: bool = False
    last_is_action: bool = False
    last_batch: str | None = None


@dataclass(frozen=True)
class IndexDelta:
    """What one append did to the index set: an index that really went, one that really came."""

    removed: int | None
    added: int | None


class IndexTracker:
    """Mutable incremental state; ``append`` reports the index delta of one view event."""

    __slots__ = ("_in_loop", "_last_batch", "_last_is_action", "_length", "_pending")

    def __init__(self, state: TrackerState | None = None) -> None:
        state = state or TrackerState()
        self._length = state.length
        self._pending: set[str | None] = set(state.pending)
        self._in_loop = state.in_loop
        self._last_is_action = state.last_is_action
        self._last_batch = state.last_batch

    def state(self) -> TrackerState:
        return TrackerState(
            length=self._length,
            pending=frozenset(self._pending),
            in_loop=self._in_loop,
            last_is_action=self._last_is_action,
            last_batch=self._last_batch,
        )

    def append(self, item: ViewItem) -> IndexDelta:
        position = self._length
        # Index ``position`` exists only if nothing was pending after the previous event.
        present_before = not self._pending
        keep_before = not splits_batch(self._last_is_action, self._last_batch, item)
        self._in_loop, keep_in_loop = loop_step(self._in_loop, item)
        track_pending(self._pending, item)
        self._last_is_action = is_action(item)
        self._last_batch = item.llm_response_id if self._last_is_action else None
        self._length = position + 1
        removed = position if present_before and not (keep_before and keep_in_loop) else None
        added = None if self._pending else position + 1
        return IndexDelta(removed=removed, added=added)

    @classmethod
    def scan(cls, items: Iterable[ViewItem]) -> tuple[IndexTracker, set[int]]:
        """A tracker positioned after ``items``, with the full index set of that view."""
        tracker = cls()
        indices = {0}
        for item in items:
            delta = tracker.append(item)
            if delta.removed is not None:
                indices.discard(delta.removed)
            if delta.added is not None:
                indices.add(delta.added)
        return tracker, indices


def full_indices(view: Sequence[ViewItem]) -> set[int]:
    """Indices recomputed from scratch: the intersection of every property's set."""
    allowed = set(range(len(view) + 1))
    for prop in ALL_PROPERTIES:
        allowed &= prop.manipulation_indices(view)
    return allowed


__all__ = ["IndexDelta", "IndexTracker", "TrackerState", "full_indices"]
