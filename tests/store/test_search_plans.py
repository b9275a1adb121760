"""The search's statement finds its rows through an index (docs/search.md): store-wide, on
PostgreSQL, plain and partitioned, the GIN index over the very expression the statement
queries (were the two texts to differ, PostgreSQL could only read every payload), and on
SQLite the FTS5 table, whatever the statistics say."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.store.read import search
from viewstore.store.read.lineage import Segment

from ..ops._helpers import message

WORDS = ["alpha", "bravo", "charlie", "delta"]


@pytest.fixture(params=[None, 4], ids=["plain", "partitioned"])
def pg_store(request: pytest.FixtureRequest, fresh_pg_url: str) -> Iterator[EventStore]:
    with EventStore(fresh_pg_url) as store:
        store.create_schema(partitions=request.param)
        yield store


def _fill(store: EventStore) -> None:
    for c in range(4):
        store.append(
            f"c{c}",
            [message(f"c{c}m{i}", f"{WORDS[i % 4]} {WORDS[i // 4 % 4]}") for i in range(200)],
        )


def _plan(store: EventStore, filters: search.Filters) -> str:
    found, params = search.statement(
        store.engine.dialect.name, ["alpha", "bravo"], filters, None, 20
    )
    explain = "EXPLAIN QUERY PLAN "
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "postgresql":
            conn.execute(text("SET enable_seqscan = off"))
            explain = "EXPLAIN "
        rows = conn.execute(text(explain + found), params).all()
    return "\n".join(str(row[-1]) for row in rows)


@pytest.mark.postgres
@pytest.mark.parametrize("analyzed", [False, True])
def test_postgres_reads_the_gin_index(pg_store: EventStore, analyzed: bool) -> None:
    _fill(pg_store)
    if analyzed:
        with pg_store.engine.connect() as conn:
            conn.execute(text("ANALYZE"))
    for filters in (search.Filters(), search.Filters(kinds=["MessageEvent"], window="forgotten")):
        plan = _plan(pg_store, filters)
        assert "Bitmap Index Scan on" in plan and "to_tsvector" in plan, plan
        assert "ix_events_search" in plan or "_to_tsvector_idx" in plan, plan
    # In one conversation, its range of the log's key serves as well: either is an index.
    one = search.Filters(segments=[Segment("c1", 0, None)], window="live", searched="c1")
    plan = _plan(pg_store, one)
    assert "Seq Scan on events" not in plan and "Seq Scan on events_p" not in plan, plan
    assert {h.event_id for h in pg_store.search("alpha bravo", conversation_id="c1").hits}


def test_sqlite_reads_the_fts_table(sqlite_url: str) -> None:
    with EventStore(sqlite_url) as store:
        store.create_schema()
        _fill(store)
        plan = _plan(store, search.Filters(window="live"))
    assert "VIRTUAL TABLE INDEX" in plan and "events_search" in plan, plan
