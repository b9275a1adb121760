"""The log's indexes (migration 0004): exactly the ones a query of the store needs, on each
backend, and the queries that need them do use them."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event, inspect

from viewstore import EventStore
from viewstore.store.feed.feed import read_feed
from viewstore.store.read import reads

from ._helpers import C, M, R, history

CID = "conv"


def index_names(store: EventStore) -> set[str]:
    found = inspect(store.engine)
    names = {ix["name"] for ix in found.get_indexes("events")}
    names |= {uq["name"] for uq in found.get_unique_constraints("events")}
    return {name for name in names if name}


def test_the_log_keeps_only_the_indexes_its_queries_need(store: EventStore) -> None:
    names = index_names(store)
    # SQLite's is a constraint; PostgreSQL's a partial unique index (docs/schema.md).
    kind = "uq" if store.engine.dialect.name == "sqlite" else "ix"
    unique = f"{kind}_events_conversation_id_event_id"
    assert {unique, "ix_events_requests"} <= names
    assert not names & {"ix_events_event_id", "ix_events_conversation_id_kind_seq"}
    if store.engine.dialect.name == "sqlite":
        assert "uq_events_position" in names
        assert "ix_events_txid_position" not in names
    else:
        assert "ix_events_txid_position" in names
        assert "uq_events_position" not in names


def test_the_request_flag_as_of_any_seq(store: EventStore) -> None:
    """The flag now comes from the partial index of requests and the condensations' key."""
    store.append(CID, history(2))  # seqs 1..7
    store.append(CID, [R("r1")])  # 8
    store.append(CID, [M("m1")])  # 9
    store.append(CID, [C("c1", ["a0", "o0"])])  # 10
    store.append(CID, [R("r2"), M("m2")])  # 11, 12
    expected = {0: False, 7: False, 8: True, 9: True, 10: False, 11: True, 12: True}
    for seq, flag in expected.items():
        assert store.view(CID, as_of=seq).unhandled_condensation_request is flag, seq
        assert store.replay(CID, as_of=seq).unhandled_condensation_request is flag, seq


def _plan(store: EventStore, sql: str, params: dict[str, Any]) -> str:
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params).all()
            return "\n".join(str(row[-1]) for row in rows)
        driver = conn.connection.driver_connection
        assert driver is not None
        pg_sql = reads._driver_sql(sql, "pyformat")  # the store's own :name -> %(name)s
        (row,) = driver.execute("EXPLAIN (FORMAT JSON) " + pg_sql, params).fetchall()
        return json.dumps(row[0])


def test_the_last_request_is_found_through_the_partial_index(store: EventStore) -> None:
    store.append(CID, history(200))
    store.append(CID, [R("r1"), M("m1")])
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:  # fresh statistics, as a long-lived database has
            conn.exec_driver_sql("ANALYZE events")
    plan = _plan(store, reads._LAST_REQUEST, {"c": CID, "a": 0, "s": 400})
    assert "ix_events_requests" in plan, plan


def test_the_sqlite_feed_reads_in_position_order_without_sorting(sqlite_url: str) -> None:
    with EventStore(sqlite_url) as store:
        store.create_schema()
        store.append(CID, history(20))
        entries = store.feed(limit=10)
        assert [e.seq for e in entries] == list(range(1, 11))
        assert [e.seq for e in store.feed(entries[-1].cursor, limit=100)] == list(range(11, 44))
        sent: list[tuple[str, Any]] = []

        def capture(_conn: Any, _cursor: Any, sql: str, params: Any, *_: Any) -> None:
            sent.append((sql, params))

        with store.engine.connect() as conn:
            event.listen(conn, "before_cursor_execute", capture)
            read_feed(conn, entries[-1].cursor, 10)
            event.remove(conn, "before_cursor_execute", capture)
            ((sql, params),) = [(q, p) for q, p in sent if "FROM events" in q]
            plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params).all()
        steps = " ".join(str(row[-1]) for row in plan)
        assert "INDEX" in steps, steps
        assert "TEMP B-TREE" not in steps, steps
