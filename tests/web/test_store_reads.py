"""The read methods the viewer added to EventStore, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from viewstore import EventStore
from viewstore.errors import ConversationNotFoundError, InvalidArgumentError

from ._data import populate


def test_catalogue_search_count_sort_and_page(db_url: str) -> None:
    """What the viewer's list reads: the catalogue with a search, and its count."""
    with EventStore(db_url) as store:
        populate(store)
        page = store.conversations()
        assert store.conversation_count() == 3
        assert [s.id for s in page] == [
            "demo-conversation",
            "script-conversation",
            "two-ranges",
        ]
        ranges = next(s for s in page if s.id == "two-ranges")
        assert (ranges.version, ranges.view_length) == (11, len(store.view("two-ranges").events))
        assert ranges.unhandled_condensation_request is False
        page = store.conversations(search="conversation", order_by="version", descending=True)
        assert store.conversation_count(search="conversation") == 2
        assert [s.id for s in page] == ["demo-conversation", "script-conversation"]
        page = store.conversations(offset=1, limit=1)
        assert [s.id for s in page] == ["script-conversation"]
        # LIKE wildcards in a search are literal characters
        assert store.conversation_count(search="%") == 0
        assert store.conversations(search="_") == []


@pytest.mark.parametrize(
    "bad",
    [{"order_by": "nope"}, {"offset": -1}, {"limit": 0}, {"offset": True}, {"search": 3}],
)
def test_catalogue_refuses_bad_arguments(db_url: str, bad: dict[str, object]) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        with pytest.raises(InvalidArgumentError):
            store.conversations(**bad)  # type: ignore[arg-type]
    if "search" in bad:
        with EventStore(db_url) as store, pytest.raises(InvalidArgumentError):
            store.conversation_count(search=bad["search"])  # type: ignore[arg-type]


def test_condensations_and_event_by_id(db_url: str) -> None:
    with EventStore(db_url) as store:
        populate(store)
        (record,) = store.condensations("two-ranges")
        assert (record.seq, record.event_id, record.summary, record.summary_offset) == (
            10,
            "c1",
            "two tool calls, both ok",
            2,
        )
        assert sorted(record.forgotten) == [("a0", True), ("a1", True), ("o0", True), ("o1", True)]
        assert store.condensations("two-ranges", upto=9) == []
        with pytest.raises(InvalidArgumentError):
            store.condensations("two-ranges", upto=12)
        with pytest.raises(ConversationNotFoundError):
            store.condensations("missing")
        event = store.event("two-ranges", "m2")
        assert event is not None and (event.seq, event.kind) == (8, "MessageEvent")
        assert store.event("two-ranges", "nope") is None
        with pytest.raises(ConversationNotFoundError):
            store.event("missing", "m2")


def test_one_condensation_and_forgotten_by(db_url: str) -> None:
    with EventStore(db_url) as store:
        populate(store)
        record = store.condensation("two-ranges", 10)
        assert record is not None and record.event_id == "c1"
        assert sorted(record.forgotten) == [("a0", True), ("a1", True), ("o0", True), ("o1", True)]
        assert store.condensation("two-ranges", 9) is None
        with pytest.raises(InvalidArgumentError):
            store.condensation("two-ranges", 12)
        assert store.forgotten_by("two-ranges", ["a0", "m1", "o1", "nope"]) == {"a0": 10, "o1": 10}
        assert store.forgotten_by("two-ranges", ["a0"], upto=9) == {}
        assert store.forgotten_by("two-ranges", []) == {}
