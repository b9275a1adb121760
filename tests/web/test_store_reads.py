"""The read methods the viewer added to EventStore, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from viewstore import EventStore
from viewstore.errors import ConversationNotFoundError, InvalidArgumentError

from ._data import populate


def test_summaries_search_sort_and_page(db_url: str) -> None:
    with EventStore(db_url) as store:
        populate(store)
        total, page = store.summaries(sort="id", descending=False)
        assert total == 3
        assert [s.conversation_id for s in page] == [
            "demo-conversation",
            "script-conversation",
            "two-ranges",
        ]
        ranges = next(s for s in page if s.conversation_id == "two-ranges")
        assert (ranges.version, ranges.view_length) == (11, len(store.view("two-ranges").events))
        assert ranges.unhandled_condensation_request is False
        total, page = store.summaries(search="conversation", sort="events", descending=True)
        assert total == 2
        assert [s.conversation_id for s in page] == ["demo-conversation", "script-conversation"]
        total, page = store.summaries(sort="id", descending=False, offset=1, limit=1)
        assert (total, [s.conversation_id for s in page]) == (3, ["script-conversation"])
        # LIKE wildcards in a search are literal characters
        assert store.summaries(search="%")[0] == 0
        assert store.summaries(search="_")[0] == 0


@pytest.mark.parametrize(
    "bad", [{"sort": "nope"}, {"offset": -1}, {"limit": 0}, {"limit": 1001}, {"offset": True}]
)
def test_summaries_refuse_bad_arguments(db_url: str, bad: dict[str, object]) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        with pytest.raises(InvalidArgumentError):
            store.summaries(**bad)  # type: ignore[arg-type]


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
