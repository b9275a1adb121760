"""PostgreSQL plans every statement afresh for the store (no server-side prepared statements).

psycopg prepares a statement on the server after a few runs, and PostgreSQL then caches a
generic plan made from the table sizes of that moment. A worker that started on a young
database kept, for its connection's life, a plan that found an event id by scanning the whole
conversation: appends grew 6x slower at 20,000 events (benchmarks/bench_store.py, "history").
The store's engine therefore disables preparation; this test pins that down.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from viewstore import EventStore

pytestmark = pytest.mark.postgres


def test_appends_leave_no_prepared_statements_on_the_connection(fresh_pg_url: str) -> None:
    store = EventStore(fresh_pg_url)
    store.create_schema()
    # More runs of the same statements than psycopg's default threshold (5) for preparing.
    for i in range(12):
        store.append("c", [{"kind": "MessageEvent", "id": f"e{i}"}], expected_version=i)
        store.view("c")
    # The pool holds one connection here: the one every append and read above used.
    with store.engine.connect() as conn:
        prepared = conn.execute(text("SELECT name FROM pg_prepared_statements")).all()
    store.close()
    assert prepared == []
