"""At most one observation-like event per tool call id (docs/semantics.md §6.1, §7)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from viewstore.domain.view.item import ViewItem, is_observation
from viewstore.domain.view.properties.base import ViewProperty


class ObservationUniquenessProperty(ViewProperty):
    name = "ObservationUniquenessProperty"

    def enforce_prepared(self, view: Sequence[ViewItem], prepared: Any) -> set[str]:
        # The first occurrence in view order wins, whatever the stream order was.
        seen: set[str | None] = set()
        duplicates: set[str] = set()
        for item in view:
            if not is_observation(item):
                continue
            if item.tool_call_id in seen:
                duplicates.add(item.id)
            else:
                seen.add(item.tool_call_id)
        return duplicates

    def manipulation_indices(self, view: Sequence[ViewItem]) -> set[int]:
        # A duplicate observation only earns a warning upstream: no index is lost.
        return set(range(len(view) + 1))
