"""How a ``Condensation`` rewrites the view (docs/semantics.md §4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from viewstore.domain.view.item import ViewItem

if TYPE_CHECKING:
    from viewstore.domain.events import Event

T = TypeVar("T", bound=ViewItem)


def forget(view: Sequence[T], condensation: Event) -> list[T]:
    """The view without the forgotten ids; ids not in the view are ignored and not remembered."""
    forgotten = condensation.forgotten_event_ids
    if not forgotten:
        return list(view)
    return [item for item in view if item.id not in forgotten]


def summary_position(condensation: Event, kept_length: int) -> int | None:
    """Where the summary lands in the post-forget view, or ``None`` when nothing is inserted.

    Offsets past the end append, exactly like ``list.insert``.
    """
    if not condensation.inserts_summary or condensation.summary_offset is None:
        return None
    return min(condensation.summary_offset, kept_length)


def condense(view: Sequence[T], condensation: Event, summary: T) -> list[T]:
    """Forget first, then insert ``summary``; so a condensation naming its own summary id
    still gets its summary (m05)."""
    kept = forget(view, condensation)
    position = summary_position(condensation, len(kept))
    if position is not None:
        kept.insert(position, summary)
    return kept
