"""The catalogue's orders by version and view length, served from ``catalogue_sizes``
(issue 41; viewstore/store/read/sizes.py): an append writes no copy, yet every list in a size
order is exact, read-only or not, however old the copies; a store that may write refreshes
them; a fork and an erasure keep one copy per living conversation."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text, update

from viewstore import EventStore
from viewstore.store.database.schema import conversations
from viewstore.store.read import sizes
from viewstore.store.read.reads import comparable
from viewstore.web.readonly import read_only_store

from ._helpers import C, M, S, U

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

WAYS = [(order, descending) for order in sizes.SIZE_ORDERS for descending in (False, True)]


def _copies(store: EventStore) -> dict[str, tuple[Any, int, int]]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT conversation_id, updated_at, version, view_length FROM catalogue_sizes")
        )
        return {row[0]: (row[1], row[2], row[3]) for row in rows}


def _exact(store: EventStore, order: str, descending: bool) -> list[str]:
    """The order by the conversations' present figures, sorted by the database itself (its
    collation of ids is the store's)."""
    way = "DESC" if descending else "ASC"
    with store.engine.connect() as conn:
        query = text(f"SELECT id FROM conversations ORDER BY {order} {way}, id {way}")
        return list(conn.execute(query).scalars())


def _walk(store: EventStore, order: str, descending: bool, limit: int) -> list[str]:
    """Every id of a keyset walk in pages of ``limit``."""
    found: list[str] = []
    cursor = None
    while True:
        page = store.conversation_page(
            order_by=order, descending=descending, limit=limit, after=cursor
        )
        found.extend(c.id for c in page.conversations)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


@pytest.fixture
def reader(db_url: str) -> Iterator[EventStore]:
    with read_only_store(db_url) as store:
        yield store


def _grow(store: EventStore, key: str, events: int) -> None:
    known = key in store.conversation_ids()
    start = store.version(key) if known else 0
    store.append(key, [M(f"{key}-m{start + i}") for i in range(events)])


def test_an_append_writes_no_copy(store: EventStore) -> None:
    store.append("a", [S(), U("u")])
    created = _copies(store)["a"]
    assert created == (None, 0, 0)  # inserted with its conversation, never refreshed
    _grow(store, "a", 3)
    assert _copies(store)["a"] == created
    assert store.refresh_catalogue_sizes() == 1
    assert _copies(store)["a"][1:] == (5, 5)
    _grow(store, "a", 1)
    assert _copies(store)["a"][1:] == (5, 5)


@pytest.mark.parametrize(("order", "descending"), WAYS)
def test_a_reader_lists_exactly_over_copies_of_any_age(
    store: EventStore, reader: EventStore, order: str, descending: bool
) -> None:
    """The read-only store never refreshes; its lists are exact from the first append on:
    copies never refreshed, refreshed once and then overtaken by appends, and current."""
    for i in range(12):
        store.append(f"c{i:02d}", [S(), U(f"u{i}"), *(M(f"m{i}-{j}") for j in range(i % 5))])
    for step in range(3):
        expected = _exact(store, order, descending)
        assert [c.id for c in reader.conversations(order_by=order, descending=descending)] == (
            expected
        )
        assert _walk(reader, order, descending, 5) == expected
        if step == 0:
            store.refresh_catalogue_sizes()
        for i in range(0, 12, 3):
            _grow(store, f"c{i:02d}", 1 + step)
        store.append(f"c{i:02d}", [C(f"k{step}-{i}", forget=[f"u{i}"])])
    assert all(copy[0] is not None for copy in _copies(store).values())


def test_the_reader_cannot_refresh(store: EventStore, reader: EventStore) -> None:
    store.append("a", [S()])
    with pytest.raises(Exception, match=r"(?i)read.only|readonly"):
        reader.refresh_catalogue_sizes()
    assert _copies(store)["a"][0] is None


def test_a_writer_refreshes_once_many_have_changed(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sizes, "REFRESH_AT", 4)
    for i in range(6):
        store.append(f"c{i}", [S()])
    store.refresh_catalogue_sizes()
    for i in range(4):  # no more than REFRESH_AT changed: the list merges, writes nothing
        _grow(store, f"c{i}", 2)
    before = _copies(store)
    store.conversations(order_by="version")
    assert _copies(store) == before
    _grow(store, "c4", 1)  # one more: the list refreshes first
    assert [c.id for c in store.conversations(order_by="version")] == _exact(
        store, "version", False
    )
    assert {k: v[1:] for k, v in _copies(store).items()} == {
        f"c{i}": (3 if i < 4 else 2 if i == 4 else 1,) * 2 for i in range(6)
    }


def test_forks_and_erasures_keep_one_copy_per_conversation(store: EventStore) -> None:
    store.append("a", [S(), U("u"), M("m1"), M("m2")])
    store.fork("a", 2, new_id="f")
    assert _copies(store)["f"][1:] == (2, 2)
    _grow(store, "f", 3)
    assert [c.id for c in store.conversations(order_by="version")] == ["a", "f"]
    store.erase("f", reason="test")
    assert set(_copies(store)) == {"a"}
    assert [c.id for c in store.conversations(order_by="view_length")] == ["a"]


def test_an_append_that_commits_later_than_the_margin_waits_for_a_full_refresh(
    store: EventStore, reader: EventStore
) -> None:
    """The documented limit: an append whose time is more than MARGIN older than the newest
    copy when it commits is not looked for again; the list then orders it by its copy until
    a full refresh (or its next append)."""
    store.append("late", [S()])
    store.append("b", [S(), U("u")])
    now = store.conversations(order_by="id")[0].updated_at  # b's

    def backdate(by: timedelta) -> None:
        with store.engine.begin() as conn:
            moment = comparable(conn, now - by)
            where = conversations.c.id == "late"
            conn.execute(update(conversations).where(where).values(updated_at=moment))

    backdate(2 * sizes.MARGIN)  # its first append, long ago
    store.refresh_catalogue_sizes()
    _grow(store, "late", 3)
    backdate(sizes.MARGIN + timedelta(seconds=1))  # read its clock, then committed this late
    assert [c.id for c in reader.conversations(order_by="version")] == ["late", "b"]
    assert store.refresh_catalogue_sizes() == 0
    assert store.refresh_catalogue_sizes(full=True) == 1
    assert [c.id for c in reader.conversations(order_by="version")] == ["b", "late"]


_NAMES = itertools.count()
_STEP = st.tuples(
    st.sampled_from(["append", "append", "append", "fork", "erase", "refresh", "full"]),
    st.integers(0, 5),
    st.integers(1, 4),
)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_STEP, min_size=1, max_size=10), limit=st.integers(1, 4))
def test_size_orders_equal_the_present_figures(
    store: EventStore, reader: EventStore, steps: list[tuple[str, int, int]], limit: int
) -> None:
    """Random appends, forks, erasures and refreshes: after each step, every size order and
    direction, listed whole by a writer and by a reader and walked in pages by the reader
    (whose copies only the writer's steps refresh), is the order of the conversations'
    present figures."""
    # Hypothesis runs every example on the same store: they add to what is there, and each
    # list is checked against all of it.
    with store.engine.connect() as conn:
        erased = set(conn.execute(text("SELECT conversation_id FROM tombstones")).scalars())
    for action, pick, size in steps:
        living = sorted(store.conversation_ids())
        if action == "append" or not living:
            names = itertools.chain([f"p{pick}"], (f"p{pick}-{n}" for n in _NAMES))
            key = next(k for k in names if k not in erased)
            _grow(store, key, size)
        elif action == "fork":
            source = living[pick % len(living)]
            at = max(1, store.version(source) - size + 1)
            store.fork(source, at, new_id=f"f{next(_NAMES)}")
        elif action == "erase":
            victim = living[pick % len(living)]
            if not store.forks(victim):
                store.erase(victim, reason="test")
                erased.add(victim)
        else:
            store.refresh_catalogue_sizes(full=action == "full")
        for order, descending in WAYS:
            expected = _exact(store, order, descending)
            for who in (store, reader):
                listed = who.conversations(order_by=order, descending=descending)
                assert [c.id for c in listed] == expected, (order, descending)
            assert _walk(reader, order, descending, limit) == expected


def test_a_rebuild_recopies_what_it_rewrote(store: EventStore, reader: EventStore) -> None:
    """A rebuild rewrites a damaged row's figures and keeps its time: no range of times
    finds that change, so the rebuild rewrites the copy too."""
    store.append("a", [S(), U("u"), M("m")])
    store.append("b", [S(), U("u")])
    with store.engine.begin() as conn:  # damage: a's row says its view is empty
        conn.execute(update(conversations).where(conversations.c.id == "a").values(view_length=0))
    store.refresh_catalogue_sizes(full=True)
    assert [c.id for c in reader.conversations(order_by="view_length")] == ["a", "b"]
    store.rebuild("a")
    assert _copies(store)["a"][1:] == (3, 3)
    assert [c.id for c in reader.conversations(order_by="view_length")] == ["b", "a"]
