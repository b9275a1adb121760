"""A thinking action and the tool calls that follow it stay together (docs/semantics.md §6.4, §7).

A tool loop starts at an action with thinking blocks and runs over the actions and
observation-likes after it. What ends a loop differs by use: for indices, the loops come from
the view, where summary events split them; for enforcement, they come from the whole stream,
where every event that is not a tool event (non-LLM events included) ends them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from viewstore.domain.view.item import ViewItem, is_thinking_action, is_tool_event
from viewstore.domain.view.properties.base import ViewProperty


def loop_step(in_loop: bool, item: ViewItem) -> tuple[bool, bool]:
    """One step of the scan: ``(in_loop after item, whether the index before item is kept)``."""
    if is_thinking_action(item):
        return True, True
    if is_tool_event(item):
        return in_loop, not in_loop
    return False, True


def tool_loops(items: Sequence[ViewItem]) -> list[list[str]]:
    """The tool loops of a sequence, as lists of member ids."""
    loops: list[list[str]] = []
    current: list[str] | None = None
    for item in items:
        if is_thinking_action(item):
            current = [item.id]
            loops.append(current)
        elif is_tool_event(item):
            if current is not None:
                current.append(item.id)
        else:
            current = None
    return loops


class ToolLoopAtomicityProperty(ViewProperty):
    name = "ToolLoopAtomicityProperty"

    def prepare(self, all_events: Sequence[ViewItem]) -> list[list[str]]:
        return tool_loops(all_events)

    def enforce_prepared(self, view: Sequence[ViewItem], prepared: Any) -> set[str]:
        loops: list[list[str]] = prepared
        present = {item.id for item in view}
        removed: set[str] = set()
        for loop in loops:
            kept = [event_id for event_id in loop if event_id in present]
            if kept and len(kept) < len(loop):
                removed.update(kept)
        return removed

    def manipulation_indices(self, view: Sequence[ViewItem]) -> set[int]:
        allowed = set(range(len(view) + 1))
        in_loop = False
        for i, item in enumerate(view):
            in_loop, keep = loop_step(in_loop, item)
            if not keep:
                allowed.discard(i)
        return allowed
