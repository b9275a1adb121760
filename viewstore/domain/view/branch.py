"""The active branch of a conversation's event tree (docs/semantics.md §9).

A cold load in OpenHands runs ``from_events`` over the path from HEAD to the root, not over the
file order; state updates hang off the chain as leaves, so they are absent from that path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from viewstore.domain.kinds import CONVERSATION_ERROR_KIND, ROOT_ID, STATE_UPDATE_KIND

if TYPE_CHECKING:
    from viewstore.domain.events import Event


def default_head(events: Sequence[Event]) -> Event | None:
    """HEAD of a legacy log: the last event that is neither a state update nor an error."""
    for event in reversed(events):
        if event.kind not in (STATE_UPDATE_KIND, CONVERSATION_ERROR_KIND):
            return event
    return None


def active_branch(
    events: Sequence[Event], leaf_event_id: str | None = None, head_is_empty: bool = False
) -> list[Event]:
    """The events from the root to HEAD, root first."""
    position = {event.id: i for i, event in enumerate(events)}
    if leaf_event_id is not None:
        start = position.get(leaf_event_id)
    elif head_is_empty:
        start = None
    else:
        head = default_head(events)
        start = None if head is None else position[head.id]
    parents = [event.parent_id for event in events]
    return [events[i] for i in branch_positions(parents, position, start)]


def branch_positions(
    parents: Sequence[str | None], position: dict[str, int], start: int | None
) -> list[int]:
    """The log positions of the path from ``start`` to the root, root first: ``parents`` are
    the events' ``parent_id`` in log order, ``position`` each id's place in the log."""
    path: list[int] = []
    seen: set[int] = set()
    index = start
    while index is not None and index not in seen:
        seen.add(index)
        path.append(index)
        parent = parents[index]
        if parent == ROOT_ID:
            index = None
        elif parent is None:
            # Legacy, pre-tree events: the parent is simply the previous event in the log.
            index = index - 1 if index > 0 else None
        else:
            index = position.get(parent)
    path.reverse()
    return path
