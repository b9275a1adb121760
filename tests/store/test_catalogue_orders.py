"""Every catalogue order read from an index (revision 0017), and keyset paging (issue 27): a
page of any order, either way, after any cursor, reads its own rows; the inactive scan and
``updated_since`` too; cursors walk the whole catalogue exactly once, even while appends go
on; a bad cursor is named."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, text

from viewstore import ConversationPage, EventStore, InvalidArgumentError
from viewstore.store.cursors import ORDERS
from viewstore.store.lifecycle.erasure import prefer_indexes
from viewstore.store.read.sizes import SIZE_ORDERS

from ..store._helpers import M, S, U

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

WAYS = [(order, descending) for order in ORDERS for descending in (False, True)]


def _fill(store: EventStore, count: int, start: int = 0) -> None:
    with store.begin() as conn:
        for i in range(start, start + count):
            events = [S(), U(f"u{i}"), *(M(f"m{i}-{j}") for j in range(i % 4))]
            store.append(f"c{i:04d}", events, connection=conn)


def _key(record: Any, order: str) -> tuple[Any, str]:
    return (None if order == "id" else getattr(record, order), record.id)


@contextmanager
def _statements(store: EventStore) -> Iterator[list[tuple[str, Any]]]:
    found: list[tuple[str, Any]] = []

    def capture(*args: Any) -> None:
        found.append((args[2], args[3]))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        yield found
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)


def _plan(store: EventStore, sql: str, params: Any) -> list[str]:
    """The plan of a statement: SQLite's query plan, or PostgreSQL's with sorts and
    sequential scans priced out (so a small table still shows whether an index can serve)."""
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
            return [str(row[-1]) for row in rows]
        conn.exec_driver_sql("SET enable_seqscan = off")
        conn.exec_driver_sql("SET enable_sort = off")
        plan = [str(row[0]).strip() for row in conn.exec_driver_sql("EXPLAIN " + sql, params)]
        conn.rollback()
        return plan


def _sorts(plan: list[str]) -> list[str]:
    """The steps of a plan that sort rows (a Merge Append's "Sort Key" merges sorted
    partitions, which is no sort)."""
    return [
        step
        for step in plan
        if "TEMP B-TREE" in step
        or re.match(r"(->\s+)?(Incremental )?Sort\s+\(", step)
        or "Seq Scan on conversations" in step
    ]


def _catalogue_plan(store: EventStore, **options: Any) -> list[str]:
    with _statements(store) as found:
        store.conversations(**options)
    # The page's statement: a size order's is the one that reads the size copies' index.
    sql, params = next(
        (s, p)
        for s, p in found
        if "FROM conversations" in s
        and (options.get("order_by") not in SIZE_ORDERS or "UNION ALL" in s)
    )
    return _plan(store, sql, params)


@pytest.mark.parametrize(("order", "descending"), WAYS)
def test_every_order_is_read_from_an_index(store: EventStore, order: str, descending: bool) -> None:
    """The indexed orders read their index and sort nothing. A size order reads the copies'
    index for the conversations that have not changed and the updated_at index for those that
    have (viewstore/store/read/sizes.py), and sorts only their merge: the page's rows and the
    changed ones, whatever the catalogue's size."""
    _fill(store, 40)
    first = store.conversations(order_by=order, descending=descending, limit=5)
    cursor = first[-1].cursor(order, descending)
    for after in (None, cursor):
        plan = _catalogue_plan(store, order_by=order, descending=descending, limit=5, after=after)
        if order in SIZE_ORDERS:
            index = rf"catalogue_sizes_(p\d+_)?{order}_conversation_id"
            assert any(re.search(index, step) for step in plan), plan
            # the changed conversations: a range of updated_at, each copy looked up by its key
            assert any("updated_at" in step and "INDEX" in step.upper() for step in plan), plan
            assert not [s for s in plan if re.search(r"^SCAN (conversations|copy)\b|Seq Scan", s)]
            continue
        assert _sorts(plan) == [], plan
        # the primary key (its partitions': conversations_pN_pkey), or the order's index
        names = ("pk_conversations", "_pkey", "autoindex") if order == "id" else (f"_{order}_id",)
        assert any(name in step for step in plan for name in names), plan


def test_updated_since_and_the_inactive_scan_read_the_updated_at_index(store: EventStore) -> None:
    _fill(store, 40)
    middle = store.conversations(order_by="updated_at")[20].updated_at
    plan = _catalogue_plan(store, order_by="updated_at", limit=5, updated_since=middle)
    assert _sorts(plan) == [], plan
    assert any("updated_at_id" in step for step in plan), plan
    with _statements(store) as found:
        store.inactive_conversations(before=middle, limit=5)
    scan, sources = (p for p in found if "FROM conversations" in p[0])
    plan = _plan(store, *scan)
    assert _sorts(plan) == [], plan
    assert any("updated_at_id" in step for step in plan), plan
    plan = _plan(store, *sources)
    assert _sorts(plan) == [], plan
    assert any("forked_from" in step for step in plan), plan


def _bulk_rows(store: EventStore, count: int) -> None:
    """``count`` conversation rows written by SQL (the plans need the rows, not their
    events); autovacuum off, so that the statistics are the test's ANALYZE."""
    with store.engine.begin() as conn:
        partitions = conn.execute(
            text(
                "SELECT inhrelid::regclass::text FROM pg_inherits "
                "WHERE inhparent = to_regclass('conversations')"
            )
        ).scalars()
        for table in list(partitions) or ["conversations"]:
            conn.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
        conn.execute(
            text(
                "INSERT INTO conversations (id, created_at, updated_at, version, "
                "unhandled_request, view_length, pending_tool_calls, in_tool_loop, "
                "last_is_action, last_hash) SELECT 'bulk-' || i, now() - interval '1 day', "
                "now() - i * interval '1 second', 2, false, 2, '[]', false, false, 'h' "
                "FROM generate_series(1, :n) AS i"
            ),
            {"n": count},
        )


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres", "postgres_partitioned"], indirect=True)
@pytest.mark.parametrize("analyzed", [False, True])
def test_the_inactive_scan_never_reads_every_conversation(
    store: EventStore, analyzed: bool
) -> None:
    """On 20,000 conversations, without statistics (autovacuum off, as on this machine's
    server) and with them: each statement of the inactive scan, planned as the scan plans it
    (prefer_indexes), is an index read, never a sequential scan of the conversations. Without
    statistics the fork lookup was a scan of every conversation (the forks, as a subquery,
    were one too)."""
    _fill(store, 5)
    fork = store.fork("c0001", 1)
    _bulk_rows(store, 20_000)
    if analyzed:
        with store.engine.begin() as conn:
            conn.execute(text("ANALYZE conversations"))
    before = store.conversations(order_by="updated_at", descending=True, limit=1)[0].updated_at
    with _statements(store) as found:
        inactive = store.inactive_conversations(before=before, limit=150)
    assert len(inactive) == 150 and "c0001" not in inactive and fork not in inactive
    statements = [p for p in found if "FROM conversations" in p[0]]
    assert len(statements) == 4  # two rounds of 100 candidates: the range, their forks
    with store.engine.begin() as conn:
        prefer_indexes(conn)
        for sql, params in statements:
            plan = [str(row[0]) for row in conn.exec_driver_sql("EXPLAIN " + sql, params)]
            assert not [step for step in plan if "Seq Scan" in step] + _sorts(plan), plan
            assert any("Index" in step for step in plan), plan


@pytest.mark.parametrize(("order", "descending"), WAYS)
def test_a_keyset_walk_lists_the_catalogue_once_in_order(
    store: EventStore, order: str, descending: bool
) -> None:
    _fill(store, 23)
    whole = store.conversations(order_by=order, descending=descending)
    walked, pages, cursor = [], 0, None
    while True:
        page = store.conversation_page(order_by=order, descending=descending, limit=4, after=cursor)
        assert isinstance(page, ConversationPage)
        walked.extend(page.conversations)
        pages += 1
        if page.next_cursor is None:
            break
        # the cursor of a page is the cursor of its last row
        assert page.next_cursor == page.conversations[-1].cursor(order, descending)
        cursor = page.next_cursor
    assert [r.id for r in walked] == [r.id for r in whole]
    assert pages == 6  # 4 * 5 + 3, the last page says it is the last
    # conversations(after=...) is the same page, as a list
    second = store.conversations(
        order_by=order, descending=descending, limit=4, after=whole[3].cursor(order, descending)
    )
    assert [r.id for r in second] == [r.id for r in whole[4:8]]


def test_keyset_pages_keep_the_filters(store: EventStore) -> None:
    _fill(store, 30)
    since = store.conversations(order_by="updated_at")[10].updated_at
    options: dict[str, Any] = {"updated_since": since, "min_view_length": 3, "search": "c00"}
    for order, descending in WAYS:
        whole = store.conversations(order_by=order, descending=descending, **options)
        walked, cursor = [], None
        while True:
            page = store.conversation_page(
                order_by=order, descending=descending, limit=2, after=cursor, **options
            )
            walked.extend(r.id for r in page.conversations)
            if (cursor := page.next_cursor) is None:
                break
        assert walked == [r.id for r in whole], (order, descending)
        assert whole


@pytest.mark.parametrize("order", ["id", "created_at"])
@pytest.mark.parametrize("descending", [False, True])
def test_a_keyset_walk_while_conversations_are_appended(
    store: EventStore, order: str, descending: bool
) -> None:
    """Appends between pages (new conversations, and more events on listed ones) never make a
    conversation of the walk appear twice or go missing, and the walk stays in order."""
    _fill(store, 20)
    before = {r.id for r in store.conversations()}
    walked: list[Any] = []
    cursor, added = None, 0
    while True:
        page = store.conversation_page(order_by=order, descending=descending, limit=3, after=cursor)
        walked.extend(page.conversations)
        for record in page.conversations[:1]:
            store.append(record.id, [M(f"late-{added}")])  # moves it in updated_at order
        _fill(store, 2, start=100 + added)  # new ones sort after or before the cursor
        added += 2
        if (cursor := page.next_cursor) is None:
            break
    ids = [r.id for r in walked]
    assert len(ids) == len(set(ids)), ids
    assert before <= set(ids)
    keys = [_key(r, order) for r in walked]
    assert keys == sorted(keys, reverse=descending)


def test_a_keyset_walk_by_updated_at_while_others_are_appended(store: EventStore) -> None:
    _fill(store, 15)
    before = [r.id for r in store.conversations(order_by="updated_at")]
    walked, cursor, added = [], None, 0
    while True:
        page = store.conversation_page(order_by="updated_at", limit=4, after=cursor)
        walked.extend(r.id for r in page.conversations)
        _fill(store, 1, start=200 + added)  # the newest: they come at the end, once each
        added += 1
        if (cursor := page.next_cursor) is None:
            break
    assert walked[: len(before)] == before
    assert len(walked) == len(set(walked))
    assert set(walked) >= {f"c{200 + i:04d}" for i in range(added - 1)}


def _forged(*values: Any) -> str:
    text_ = json.dumps(list(values)).encode()
    return "c1." + base64.urlsafe_b64encode(text_).decode().rstrip("=")


@pytest.mark.parametrize(
    ("after", "order", "descending", "says"),
    [
        ("", "id", False, "after must be a cursor"),
        ("nonsense", "id", False, "after must be a cursor"),
        (12, "id", False, "after must be a cursor"),
        ("c1.!!!", "id", False, "does not decode"),
        ("c1." + "A" * 5000, "id", False, "5003 characters"),
        (_forged("id", False), "id", False, "not a catalogue position"),
        (_forged("size", False, 1, "c"), "id", False, "not a catalogue position"),
        (_forged("version", False, 1, "c"), "updated_at", False, "order by version, not"),
        (_forged("version", False, 1, "c"), "version", True, "not of the order by version desc"),
        (_forged("version", False, "1", "c"), "version", False, "its version is not one"),
        (_forged("version", False, True, "c"), "version", False, "its version is not one"),
        (_forged("updated_at", False, "yesterday", "c"), "updated_at", False, "not one"),
        (_forged("updated_at", False, "2026-01-01T00:00:00", "c"), "updated_at", False, "offset"),
        (_forged("id", False, 3, "c"), "id", False, "its id is not one"),
    ],
)
def test_a_bad_cursor_is_named(
    store: EventStore, after: Any, order: Any, descending: bool, says: str
) -> None:
    _fill(store, 3)
    with pytest.raises(InvalidArgumentError, match=says):
        store.conversations(order_by=order, descending=descending, after=after)
    with pytest.raises(InvalidArgumentError, match=says):
        store.conversation_page(order_by=order, descending=descending, after=after)


def test_a_cursor_of_a_conversation_erased_since_still_pages(store: EventStore) -> None:
    _fill(store, 6)
    first = store.conversation_page(order_by="version", limit=2)
    assert first.next_cursor is not None
    store.erase(first.conversations[-1].id, reason="test")
    rest = store.conversation_page(order_by="version", limit=10, after=first.next_cursor)
    whole = [r.id for r in store.conversations(order_by="version")]
    assert [r.id for r in rest.conversations] == whole[1:]
    assert rest.to_dict()["next_cursor"] is None


def test_the_indexes_are_in_the_schema(store: EventStore) -> None:
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            query = "SELECT name FROM sqlite_master WHERE type = 'index'"
        else:
            query = "SELECT indexname FROM pg_indexes"
        names = set(conn.execute(text(query)).scalars())
    assert names >= {
        *(f"ix_conversations_{order}_id" for order in ("created_at", "updated_at")),
        *(f"ix_catalogue_sizes_{order}_conversation_id" for order in SIZE_ORDERS),
    }
    # An append moves its conversation in no index of the sizes (issue 41).
    assert not {f"ix_conversations_{order}_id" for order in SIZE_ORDERS} & names
