"""The interface every view property implements.

A property answers two questions about a view: which of its events must go for the view to be
valid (``enforce``, used on the resume path), and at which positions a condenser may cut without
breaking it (``manipulation_indices``). ``prepare`` precomputes, once per enforcement run,
whatever the property needs from the full event stream, so that each enforcement round costs
O(view) rather than O(view x events).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from viewstore.domain.view.item import ViewItem


class ViewProperty(ABC):
    name: ClassVar[str]

    def prepare(self, all_events: Sequence[ViewItem]) -> Any:
        """Facts from the whole stream that ``enforce_prepared`` needs; none by default."""
        return None

    @abstractmethod
    def enforce_prepared(self, view: Sequence[ViewItem], prepared: Any) -> set[str]:
        """Ids of view events to remove, given what ``prepare`` returned."""

    def enforce(self, view: Sequence[ViewItem], all_events: Sequence[ViewItem]) -> set[str]:
        """Ids of view events to remove so that the view satisfies this property."""
        return self.enforce_prepared(view, self.prepare(all_events))

    @abstractmethod
    def manipulation_indices(self, view: Sequence[ViewItem]) -> set[int]:
        """The subset of ``0..len(view)`` this property allows."""
