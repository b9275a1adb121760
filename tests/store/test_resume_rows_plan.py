"""A resume computed from rows reads the rows that left the view through indexes, not by
reading the conversation's every view row: each of its statements about left rows is planned
on ``ix_view_entries_left_actions`` (revision 0019) or on a range of the primary key's keys
(the stretch around the view's tool events, revision 0025)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.store.read import reads, resume_check

from ..store._helpers import A, C, O, U
from .test_catalogue_orders import _plan

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True


def _history(store: EventStore, batches: int) -> None:
    """Batches of two calls, a condensation every 20 batches that cuts the newest batch
    after its first call (the live and the resume view then differ)."""
    events = [U("u")]
    view: list[str] = ["u"]
    for n in range(batches):
        batch = [A(f"a{n}", f"t{n}", f"r{n}"), A(f"b{n}", f"s{n}", f"r{n}")]
        results = [O(f"o{n}", f"t{n}"), O(f"p{n}", f"s{n}")]
        events.append(batch[0])
        view.append(f"a{n}")
        if n and n % 20 == 0:
            events.append(C(f"c{n}", forget=[*view[1:-30], f"a{n}"]))
            view = [view[0], *view[-30:-1]]
        events += [batch[1], *results]
        view += [f"b{n}", f"o{n}", f"p{n}"]
    with store.begin() as conn:
        for start in range(0, len(events), 200):
            store.append("long", events[start : start + 200], connection=conn)


def test_left_rows_are_read_through_their_indexes(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(store, 200)
    postgres = store.engine.dialect.name == "postgresql"
    if postgres:
        with store.engine.begin() as conn:
            conn.execute(text("ANALYZE"))  # as autovacuum does after such a load
    statements: list[tuple[str, dict[str, Any]]] = []

    def recorded(conn: Any, sql: str, params: dict[str, Any]) -> Any:
        statements.append((sql, params))
        return reads._fetch(conn, sql, params)

    monkeypatch.setattr(resume_check, "_fetch", recorded)
    resumed = store.resume_view("long", skip_state_updates=True)
    assert len(resumed.event_ids) < len(store.view("long").event_ids)  # the cut batch goes
    left = [(sql, params) for sql, params in statements if "left_seq IS NOT NULL" in sql]
    assert len(left) == 2, [sql for sql, _ in statements]
    for sql, params in left:
        driver_sql = reads._driver_sql(sql, "pyformat" if postgres else "named")
        plan = " ".join(_plan(store, driver_sql, params))
        # A partition's part of an index is named by the server from its columns.
        names = ("view_entries_left_actions", "llm_response_id_idx")
        if "order_key" in sql:
            names = ("pk_view_entries", "sqlite_autoindex_view_entries_1", "_pkey")
            assert "order_key" in plan, plan  # a range of keys, not the conversation's rows
        assert any(name in plan for name in names), plan
