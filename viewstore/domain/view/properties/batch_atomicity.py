"""Actions of one LLM response stay together (docs/semantics.md §6.2, §7)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from viewstore.domain.view.item import ViewItem, is_action
from viewstore.domain.view.properties.base import ViewProperty


def _batches(items: Sequence[ViewItem]) -> dict[str | None, set[str]]:
    batches: dict[str | None, set[str]] = defaultdict(set)
    for item in items:
        if is_action(item):
            batches[item.llm_response_id].add(item.id)
    return batches


def splits_batch(previous_is_action: bool, previous_batch: str | None, item: ViewItem) -> bool:
    """Whether the gap before ``item`` would split a batch, given the event before it."""
    return previous_is_action and is_action(item) and item.llm_response_id == previous_batch


class BatchAtomicityProperty(ViewProperty):
    name = "BatchAtomicityProperty"

    def prepare(self, all_events: Sequence[ViewItem]) -> dict[str | None, set[str]]:
        return _batches(all_events)

    def enforce_prepared(self, view: Sequence[ViewItem], prepared: Any) -> set[str]:
        full: dict[str | None, set[str]] = prepared
        removed: set[str] = set()
        for response_id, present in _batches(view).items():
            if present != full.get(response_id, set()):
                removed |= present
        return removed

    def manipulation_indices(self, view: Sequence[ViewItem]) -> set[int]:
        # Only adjacent actions are guarded: an event between two actions of one batch
        # (an agent error after an invalid call, say) leaves that gap open (m16, m26).
        allowed = set(range(len(view) + 1))
        for i in range(1, len(view)):
            previous = view[i - 1]
            if splits_batch(is_action(previous), previous.llm_response_id, view[i]):
                allowed.discard(i)
        return allowed
