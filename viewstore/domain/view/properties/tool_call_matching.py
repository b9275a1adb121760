"""Every action has its observation and vice versa (docs/semantics.md §6.3, §7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from viewstore.domain.view.item import ViewItem, is_action, is_observation
from viewstore.domain.view.properties.base import ViewProperty


def track_pending(pending: set[str | None], item: ViewItem) -> None:
    """Update the pending tool-call ids with one view event, in place.

    Pending ids are a plain set: one observation resolves every pending action with its id,
    an observation ahead of its action resolves nothing, and an orphan changes nothing.
    """
    if is_action(item):
        pending.add(item.tool_call_id)
    elif is_observation(item):
        pending.discard(item.tool_call_id)


class ToolCallMatchingProperty(ViewProperty):
    name = "ToolCallMatchingProperty"

    def enforce_prepared(self, view: Sequence[ViewItem], prepared: Any) -> set[str]:
        # Set semantics on purpose: order and multiplicity do not matter here (m10, m14).
        action_ids = {item.tool_call_id for item in view if is_action(item)}
        observed_ids = {item.tool_call_id for item in view if is_observation(item)}
        return {
            item.id
            for item in view
            if (is_action(item) and item.tool_call_id not in observed_ids)
            or (is_observation(item) and item.tool_call_id not in action_ids)
        }

    def manipulation_indices(self, view: Sequence[ViewItem]) -> set[int]:
        allowed = {0}
        pending: set[str | None] = set()
        for i, item in enumerate(view):
            track_pending(pending, item)
            if not pending:
                allowed.add(i + 1)
        return allowed
