"""The append fast path (viewstore/store/append/fast_path.py): a store that committed the last
append to a conversation writes the next plain one without reading, guarded by a compare-and-set.

Everything here is checked against the ordinary locked path: same rows, same answers, and a
stale tail, a stored id or a wrong ``expected_version`` must leave the database untouched and
fall back to the ordinary path's answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import ConcurrencyError, DuplicateEventError, EventStore
from viewstore.domain.projector import ProjectionState
from viewstore.store import event_store
from viewstore.store.append import fast_path, tails
from viewstore.store.append.batch import parse_batch
from viewstore.store.distribution import server_append

from ..store._helpers import A, C, M, O, Payload, R, S, U, X, dump, history

CID = "conv"


@dataclass
class Spy:
    """How many fast writes were tried, and how many committed."""

    tried: int = 0
    committed: int = 0
    plans: list[fast_path.Plan] = field(default_factory=list)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    seen = Spy()
    for name in ("write_postgres", "write_sqlite"):
        original = getattr(fast_path, name)

        def wrapped(
            conn: Any, plan: fast_path.Plan, original: Any = original, **options: Any
        ) -> bool:
            seen.tried += 1
            seen.plans.append(plan)
            ok = bool(original(conn, plan, **options))
            seen.committed += ok
            return ok

        monkeypatch.setattr(fast_path, name, wrapped)
    return seen


@pytest.fixture
def ordinary_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Force the ordinary path: crash points exist only there, so a set hook disables the
    fast path (see ``EventStore._fast_append``)."""
    monkeypatch.setattr(event_store, "append_hook", lambda _point: None)
    yield


def comparable(store: EventStore, cid: str) -> dict[str, list[tuple[Any, ...]]]:
    """The conversation's rows, without what legitimately differs between two runs (wall
    clock, feed position and transaction id)."""
    queries = {
        "events": "SELECT seq, event_id, kind, source, timestamp, parent_id, payload, hash "
        "FROM events WHERE conversation_id = :c ORDER BY seq",
        "view_entries": "SELECT * FROM view_entries WHERE conversation_id = :c ORDER BY order_key",
        "manipulation_indices": "SELECT * FROM manipulation_indices WHERE conversation_id = :c "
        "ORDER BY position, from_seq",
        "conversations": "SELECT * FROM conversations WHERE id = :c",
    }
    out = {}
    with store.engine.connect() as conn:
        for name, sql in queries.items():
            rows = conn.execute(text(sql), {"c": cid}).mappings().all()
            out[name] = [
                tuple(
                    v
                    for k, v in row.items()
                    if k not in ("conversation_id", "id", "created_at", "updated_at")
                )
                for row in rows
            ]
    return out


# A conversation with every kind of plain append: batches, thinking loops, errors, a request,
# an event the view ignores, and condensations (which always take the ordinary path).
SCRIPT: list[list[Payload]] = [
    [S(), U("u1")],
    [A("a1", "t1", "r1", thinking=True)],
    [A("a2", "t2", "r1", thinking=True)],
    [O("o2", "t2")],
    [O("o1", "t1")],
    [M("m1")],
    [X("x1")],
    [U("u2"), A("a3", "t3", "r2"), A("a4", "t4", "r2")],
    [O("o3", "t3"), O("o4", "t4")],
    [R("req")],
    [C("c1", ["u1", "a1", "a2", "o2", "o1"], "summary", 1)],
    [M("m2")],
    [A("a5", "t5", "r3")],
    [O("o5", "t5"), M("m3")],
    [C("c2", ["m2"])],
    [U("u3")],
]


def run_script(store: EventStore, cid: str) -> list[int]:
    return [store.append(cid, batch).version for batch in SCRIPT]


def test_plain_appends_after_the_first_take_the_fast_path(store: EventStore, spy: Spy) -> None:
    store.append(CID, [S(), U("u1")])  # no tail yet: the ordinary path
    assert spy.tried == 0
    for i in range(5):
        result = store.append(CID, [M(f"m{i}")])
        assert result.version == 3 + i
        assert result.first_seq == 3 + i
        assert result.appended == [f"m{i}"]
        assert result.rows_written >= 1
    assert (spy.tried, spy.committed) == (5, 5)
    assert store.verify(CID).ok
    assert store.view(CID).event_ids == ["S", "u1", "m0", "m1", "m2", "m3", "m4"]


def test_condensations_always_take_the_ordinary_path(store: EventStore, spy: Spy) -> None:
    store.append(CID, history(2))
    store.append(CID, [C("c", ["a0", "o0"])])
    assert spy.tried == 0
    store.append(CID, [M("after")])
    assert spy.committed == 1
    assert store.verify(CID).ok


def test_fast_and_ordinary_paths_write_identical_rows(
    db_url: str, spy: Spy, store_class: Any
) -> None:
    with store_class(db_url) as fast:
        fast.create_schema()
        versions = run_script(fast, "fast")
        assert spy.committed > 5
        expected = comparable(fast, "fast")
        assert fast.verify().ok
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(event_store, "append_hook", lambda _point: None)
        with store_class(db_url) as ordinary:
            before = spy.tried
            assert run_script(ordinary, "ordinary") == versions
            assert spy.tried == before
            assert comparable(ordinary, "ordinary") == expected


def test_a_stale_tail_falls_back_and_appends_in_order(
    db_url: str, spy: Spy, store_class: Any
) -> None:
    """Two stores (two workers) taking turns on one conversation: each one's tail is always
    stale, the guard says so, nothing is written by the stale attempt, and the ordinary path
    appends at the right seq."""
    with store_class(db_url) as one, store_class(db_url) as two:
        one.create_schema()
        one.append(CID, [S()])
        two.append(CID, [U("u0")])
        for i in range(1, 9):
            writer = one if i % 2 else two
            assert writer.append(CID, [M(f"m{i}")]).version == 2 + i
        assert spy.tried >= 7
        assert spy.committed == 0  # every tail was one append behind
        events = one.events(CID)
        assert [e.seq for e in events] == list(range(1, 11))
        assert [e.event_id for e in events][2:] == [f"m{i}" for i in range(1, 9)]
        assert one.verify(CID).ok


def test_a_stale_tail_with_expected_version_still_raises(db_url: str, store_class: Any) -> None:
    with store_class(db_url) as one, store_class(db_url) as two:
        one.create_schema()
        one.append(CID, [S(), U("u")])
        two.append(CID, [M("m")], expected_version=2)
        before = dump(one.engine)
        with pytest.raises(ConcurrencyError) as caught:
            one.append(CID, [M("late")], expected_version=2)
        assert (caught.value.expected, caught.value.actual) == (2, 3)
        assert dump(one.engine) == before


def test_expected_version_mismatch_with_a_fresh_tail_writes_nothing(
    store: EventStore, spy: Spy
) -> None:
    store.append(CID, [S(), U("u")])
    before = dump(store.engine)
    with pytest.raises(ConcurrencyError):
        store.append(CID, [M("m")], expected_version=1)
    assert spy.tried == 0
    assert dump(store.engine) == before
    assert store.append(CID, [M("m")], expected_version=2).version == 3
    assert spy.committed == 1


def test_an_exact_resend_is_a_no_op(store: EventStore, spy: Spy) -> None:
    store.append(CID, [S(), U("u")])
    store.append(CID, [M("m")])
    before = dump(store.engine)
    result = store.append(CID, [M("m")])
    assert (result.version, result.appended, result.duplicates) == (3, [], ["m"])
    assert spy.tried == 2 and spy.committed == 1  # the resend hit the unique id, then fell back
    assert dump(store.engine) == before


def test_a_stored_id_with_another_payload_is_refused_and_writes_nothing(
    store: EventStore, spy: Spy
) -> None:
    store.append(CID, [S(), U("u")])
    store.append(CID, [M("m")])
    before = dump(store.engine)
    with pytest.raises(DuplicateEventError):
        store.append(CID, [M("fresh"), M("m", "something else")])
    assert dump(store.engine) == before
    assert store.append(CID, [M("fresh")]).version == 4
    assert store.verify(CID).ok


def test_the_guard_checks_the_hash_chain_too(store: EventStore, spy: Spy) -> None:
    """A tail whose version matches but whose last hash does not (the row was written by
    something else) must not be trusted."""
    store.append(CID, [S(), U("u")])
    tail = store._tails.get(CID)
    assert tail is not None
    store._tails.put(CID, tails.Tail(tail.state, "f" * 64))
    assert store.append(CID, [M("m")]).version == 3
    assert (spy.tried, spy.committed) == (1, 0)
    assert store.verify(CID).ok


def test_batches_past_the_limit_take_the_ordinary_path(store: EventStore, spy: Spy) -> None:
    store.append(CID, [S()])
    big = [M(f"m{i}") for i in range(fast_path.BATCH_LIMIT + 1)]
    store.append(CID, big)
    assert spy.tried == 0
    store.append(CID, [A(f"a{i}", f"t{i}", "r") for i in range(fast_path.BATCH_LIMIT)])
    assert spy.committed == 1
    assert store.verify(CID).ok


def test_rebuild_forgets_the_tails(store: EventStore, spy: Spy) -> None:
    store.append(CID, history(3))
    store.rebuild(CID)
    store.append(CID, [M("after")])
    assert spy.tried == 0
    store.append(CID, [M("again")])
    assert spy.committed == 1


def test_the_tail_cache_is_bounded() -> None:
    cache = tails.Tails(limit=3)
    tail = tails.Tail(ProjectionState(), "0" * 64)
    for key in "abcd":
        cache.put(key, tail)
    assert cache.get("a") is None
    assert all(cache.get(key) is tail for key in "bcd")
    cache.put("b", tail)  # now the most recent
    cache.put("e", tail)
    assert cache.get("c") is None and cache.get("b") is tail


@pytest.mark.postgres
def test_postgres_closes_an_index_through_both_index_columns(
    fresh_pg_url: str, spy: Spy, store_class: Any
) -> None:
    """The fast statement's plan, on a conversation with hundreds of open indices, must look the
    closed index up by (conversation_id, position), not scan the open ones: that would make an
    append cost grow with the view."""
    with store_class(fresh_pg_url) as store:
        store.create_schema()
        store.append(CID, history(150))
        for event in TAIL:
            store.append(CID, [event])
        closing = [plan for plan in spy.plans if plan.projection.closed_indices]
        assert closing, "the tail closes an index"
        plan = closing[0]
        sql, params = fast_path.postgres_statement(store.engine.dialect, plan)
        with store.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            explained = raw.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
            conn.rollback()
    assert explained is not None
    scans = list(_nodes(explained[0][0]["Plan"]))
    reads = [
        node
        for node in scans
        if node.get("Relation Name") == "manipulation_indices" and "Scan" in node["Node Type"]
    ]
    assert reads, json.dumps(explained[0])
    for node in reads:
        assert node["Node Type"] in ("Index Scan", "Index Only Scan"), node
        assert "position" in node.get("Index Cond", ""), node


@pytest.mark.postgres
def test_the_server_function_closes_an_index_through_both_index_columns(
    fresh_pg_url: str,
    store_class: Any,
) -> None:
    """The same for ``viewstore_append_rows`` (migration 0014): its close of an index, run on
    a conversation with hundreds of open indices, reads the one row it closes, not every open
    one. The function's own plans are not visible to ``EXPLAIN``; the transaction's table
    statistics count the rows it read."""
    with store_class(fresh_pg_url, server_append=True) as store:
        store.create_schema()
        store.append(CID, history(150))
        for event in TAIL:
            tail = store._tails.get(CID)
            assert tail is not None
            batch = parse_batch([event], store.max_event_bytes)
            plan = fast_path.plan(CID, tail, batch, datetime.now(UTC), None)
            if plan.projection.closed_indices:
                break
            store.append(CID, [event])
        else:
            pytest.fail("the tail closes no index")
        with store.engine.connect() as conn:
            open_indices = conn.execute(
                text(
                    "SELECT count(*) FROM manipulation_indices "
                    "WHERE conversation_id = :c AND to_seq IS NULL"
                ),
                {"c": CID},
            ).scalar_one()
        with store.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            # The backend's counts not yet flushed show too: the call's are the difference.
            before = _table_reads(raw, "manipulation_indices")
            sql, params = server_append.call(plan)
            assert raw.execute(sql, params).fetchone() == (True,)
            after = _table_reads(raw, "manipulation_indices")
            conn.rollback()
    assert open_indices > 100
    seq_read, index_fetched, updated = (b - a for a, b in zip(before, after, strict=True))
    assert updated == len(plan.projection.closed_indices) == 1
    assert (seq_read, index_fetched) == (0, 1), (before, after)


def _table_reads(raw: Any, table: str) -> tuple[int, int, int]:
    """Rows this backend's transaction read from ``table`` by scan and by index, and updated."""
    row = raw.execute(
        "SELECT seq_tup_read, idx_tup_fetch, n_tup_upd FROM pg_stat_xact_user_tables "
        "WHERE relname = %s",
        (table,),
    ).fetchone()
    assert row is not None
    return (int(row[0]), int(row[1]), int(row[2]))


# A thinking-block tool loop: the action that continues it closes the index its first
# observation opened.
TAIL: list[Payload] = [
    U("t-u"),
    A("t-a1", "t-tc1", "t-r1", thinking=True),
    O("t-o1", "t-tc1"),
    A("t-a2", "t-tc2", "t-r2"),
    O("t-o2", "t-tc2"),
    M("t-m"),
]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("server_append", [True, False], ids=["function", "statement"])
def test_both_postgres_fast_writes_store_what_the_ordinary_path_stores(
    db_url: str, vectors_dir: Path, server_append: bool, sweep_step: int, store_class: Any
) -> None:
    """The server-side function (migration 0014) and the single statement it replaces each
    write exactly the rows the ordinary path writes."""
    fast = store_class(db_url, server_append=server_append)
    fast.create_schema()
    ordinary = store_class(fast.engine, fast_path=False)
    cases = sorted((vectors_dir / "cases").glob("*.jsonl"))[:12]
    for case in cases[::sweep_step]:
        for line in case.read_text().splitlines():
            fast.append(f"fast-{case.stem}", json.loads(line))
            ordinary.append(f"slow-{case.stem}", json.loads(line))
        a, b = fast.view(f"fast-{case.stem}"), ordinary.view(f"slow-{case.stem}")
        assert (a.event_ids, a.payloads, a.manipulation_indices) == (
            b.event_ids,
            b.payloads,
            b.manipulation_indices,
        )
        assert a.unhandled_condensation_request == b.unhandled_condensation_request
        logs = [
            [
                (e.seq, e.event_id, e.payload_json, e.hash)
                for e in store.events(f"{side}-{case.stem}")
            ]
            for store, side in ((fast, "fast"), (ordinary, "slow"))
        ]
        assert logs[0] == logs[1]
    assert fast.verify().ok
    fast.close()
