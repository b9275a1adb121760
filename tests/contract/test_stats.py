"""``EventStore.stats``: store-wide counts read in one snapshot, full and fast, on every backend
and layout, sync and async. The expected figures are worked out from what each test appends,
not read back from the store."""

from __future__ import annotations

from viewstore import EventStore
from viewstore.store import StoreStats, ViewSizes

from ..ops._helpers import action, condensation, message, observation


def test_an_empty_store_counts_nothing(store: EventStore) -> None:
    empty = ViewSizes(min=0, mean=0, max=0, total=0)
    every = {"conversations": True, "events": True, "condensations": True}
    assert store.stats() == StoreStats(0, 0, 0, every, empty, {})
    assert store.stats(fast=True) == StoreStats(0, 0, 0, every, None, None)


def test_counts_views_and_kinds(store: EventStore) -> None:
    store.append("a", [message("m1"), action("a1"), observation("o1")])
    # b: three messages, then a condensation that forgets two of them: a view of one message
    # (the condensation itself is not in the view)
    store.append("b", [message("m1"), message("m2"), message("m3")])
    store.append("b", [condensation("c1", forgotten=("m1", "m2"))])
    stats = store.stats()
    assert (stats.events, stats.condensations) == (7, 1)
    assert stats.events_by_kind == {
        "ActionEvent": 1,
        "Condensation": 1,
        "MessageEvent": 4,
        "ObservationEvent": 1,
    }
    assert stats.view_sizes is not None
    assert stats.conversations == 2
    assert stats.view_sizes == ViewSizes(min=1, mean=2.0, max=3, total=4)
    assert [len(store.view(key).event_ids) for key in ("a", "b")] == [3, 1]
    fast = store.stats(fast=True)
    assert (fast.conversations, fast.events, fast.condensations) == (2, 7, 1)
    assert all(fast.exact.values()) and fast.view_sizes is None and fast.events_by_kind is None
    assert stats.to_dict()["view_sizes"] == vars(stats.view_sizes)
