"""The read methods the viewer added to EventStore, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from viewstore import EventStore
from viewstore.domain.errors import ConversationNotFoundError, InvalidArgumentError

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


def test_a_view_page_is_that_window_of_the_whole_view(db_url: str) -> None:
    """Every window of the view, now and at every seq, is the slice of the whole view; the
    indices and the flag are the whole view's."""
    with EventStore(db_url) as store:
        populate(store)
        version = store.version("two-ranges")
        for as_of in [None, *range(version + 1)]:
            whole = store.view("two-ranges", as_of=as_of)
            length = len(whole.event_ids)
            for first, limit in [(None, 3), (0, 1), (0, 100), (max(0, length - 2), 5)]:
                page = store.view_page("two-ranges", as_of=as_of, first=first, limit=limit)
                start = max(0, length - limit) if first is None else first
                assert (page.length, page.first) == (length, start)
                assert page.view.event_ids == whole.event_ids[start : start + limit]
                assert page.view.payloads == whole.payloads[start : start + limit]
                assert page.view.manipulation_indices == whole.manipulation_indices
                assert (
                    page.view.unhandled_condensation_request == whole.unhandled_condensation_request
                )
            ids = [e.event_id for e in store.events("two-ranges")] + ["c1-summary", "nope"]
            assert store.in_view("two-ranges", ids, as_of=as_of) == set(whole.event_ids)


@pytest.mark.parametrize(
    "bad", [{"first": 9}, {"first": -1}, {"limit": 0}, {"as_of": 12}, {"first": True}]
)
def test_a_view_page_refuses_what_is_not_there(db_url: str, bad: dict[str, object]) -> None:
    with EventStore(db_url) as store:
        populate(store)
        with pytest.raises(InvalidArgumentError):
            store.view_page("two-ranges", **bad)  # type: ignore[arg-type]
        with pytest.raises(ConversationNotFoundError):
            store.view_page("missing")
        with pytest.raises(ConversationNotFoundError):
            store.in_view("missing", ["a"])
