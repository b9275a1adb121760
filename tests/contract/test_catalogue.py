"""``store.conversations()``: the catalogue records, their order, paging and filters."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from viewstore import ConversationInfo, EventStore, InvalidArgumentError

from ..store._helpers import A, C, M, O, R, S, U


def _fill(store: EventStore) -> datetime:
    """Three conversations; returns a moment between the second's and the third's appends.

    a: S U A O M R      (6 events, view 5, request up, last kind CondensationRequest)
    b: S U              (2 events, view 2)
    c: S U M C(forget U) (4 events, view 2, last kind Condensation), appended last
    """
    store.append("b", [S(), U("u")])
    store.append("a", [S(), U("u"), A("a1", "t1", "r1"), O("o1", "t1"), M("m"), R("r")])
    time.sleep(0.05)
    middle = datetime.now(UTC)
    time.sleep(0.05)
    store.append("c", [S(), U("u"), M("m")])
    store.append("c", [C("c1", ["u"])])
    return middle


def test_records_carry_what_the_rows_hold(store: EventStore) -> None:
    before = datetime.now(UTC)
    _fill(store)
    records = store.conversations()
    assert [r.id for r in records] == ["a", "b", "c"]
    a, b, c = records
    assert isinstance(a, ConversationInfo)
    assert (a.version, a.view_length, a.unhandled_condensation_request, a.last_event_kind) == (
        6,
        5,
        True,
        "CondensationRequest",
    )
    assert (b.version, b.view_length, b.last_event_kind) == (2, 2, "MessageEvent")
    assert (c.version, c.view_length, c.last_event_kind) == (4, 2, "Condensation")
    assert c.view_length == len(store.view("c").event_ids)
    for record in records:
        assert before - timedelta(seconds=1) <= record.created_at <= record.updated_at
        assert record.updated_at.tzinfo is not None
    assert c.updated_at > c.created_at  # two appends
    assert a.to_dict()["id"] == "a"
    assert datetime.fromisoformat(a.to_dict()["updated_at"]) == a.updated_at


def test_order_paging_and_filters(store: EventStore) -> None:
    middle = _fill(store)

    def ids(**options: object) -> list[str]:
        return [r.id for r in store.conversations(**options)]  # type: ignore[arg-type]

    assert ids(order_by="version") == ["b", "c", "a"]
    assert ids(order_by="version", descending=True) == ["a", "c", "b"]
    assert ids(order_by="view_length") == ["b", "c", "a"]  # b and c tie at 2: id order
    assert ids(order_by="created_at") == ["b", "a", "c"]
    assert ids(order_by="updated_at", descending=True) == ["c", "a", "b"]
    assert ids(limit=2) == ["a", "b"]
    assert ids(limit=2, offset=2) == ["c"]
    assert ids(offset=3) == []
    assert ids(updated_since=middle) == ["c"]
    assert ids(updated_since=middle.astimezone(timezone(timedelta(hours=2)))) == ["c"]
    assert ids(min_view_length=3) == ["a"]
    assert ids(min_view_length=2, order_by="version", descending=True, limit=1) == ["a"]
    assert store.conversation_ids() == ["a", "b", "c"]


@pytest.mark.parametrize(
    "options",
    [
        {"order_by": "payload"},
        {"limit": 0},
        {"limit": True},
        {"offset": -1},
        {"min_view_length": -1},
        {"updated_since": datetime(2026, 1, 1)},  # naive: which zone?
        {"updated_since": "2026-01-01"},
    ],
)
def test_bad_options_are_refused(store: EventStore, options: dict[str, object]) -> None:
    with pytest.raises(InvalidArgumentError):
        store.conversations(**options)  # type: ignore[arg-type]


def test_an_empty_store_has_an_empty_catalogue(store: EventStore) -> None:
    assert store.conversations() == []
