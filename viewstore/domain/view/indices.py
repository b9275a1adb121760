"""The set of manipulation indices of a view."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from viewstore.domain.errors import NoManipulationIndexError


class ManipulationIndices(set[int]):
    """Positions between view events where a condenser may cut or insert.

    Index ``i`` is the gap before ``view[i]``; index ``len(view)`` is the end.
    """

    def __init__(self, indices: Iterable[int] = ()) -> None:
        super().__init__(indices)

    @classmethod
    def complete(cls, events: Sequence[Any]) -> ManipulationIndices:
        """Every position ``0..len(events)``: what a view with no constraints allows."""
        return cls(range(len(events) + 1))

    def find_next(self, threshold: int) -> int:
        """The smallest index ``>= threshold``; raises when there is none (as OpenHands does)."""
        candidates = [i for i in self if i >= threshold]
        if not candidates:
            raise NoManipulationIndexError(f"No manipulation index found >= {threshold}.")
        return min(candidates)
