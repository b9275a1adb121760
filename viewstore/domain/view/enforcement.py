"""Enforcement of the view properties to a fixpoint (docs/semantics.md §7).

OpenHands restarts from the first property after every removal by recursing, which fails past
about a thousand cascading rounds; here the fixpoint is a loop. Each property precomputes what it
needs from the full stream once, so a round costs O(view), not O(view x tool loops).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from viewstore.domain.view.item import ViewItem
from viewstore.domain.view.properties import ALL_PROPERTIES, ViewProperty

T = TypeVar("T", bound=ViewItem)


@dataclass(frozen=True)
class EnforcementRound:
    """One round: the property that removed something, and what (in view order)."""

    property: str
    removed: tuple[str, ...]


def enforce_properties(
    view: Sequence[T],
    all_events: Sequence[ViewItem],
    properties: Sequence[ViewProperty] = ALL_PROPERTIES,
) -> tuple[list[T], list[EnforcementRound]]:
    """The enforced view and the rounds that produced it."""
    prepared = [prop.prepare(all_events) for prop in properties]
    current = list(view)
    rounds: list[EnforcementRound] = []
    while True:
        for prop, facts in zip(properties, prepared, strict=True):
            removed = prop.enforce_prepared(current, facts)
            if removed:
                in_order = tuple(item.id for item in current if item.id in removed)
                rounds.append(EnforcementRound(prop.name, in_order))
                current = [item for item in current if item.id not in removed]
                break
        else:
            return current, rounds
