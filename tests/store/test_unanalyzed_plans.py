"""Every per-conversation statement keeps an index plan on a store that was never analyzed,
and reads rows in proportion to what it returns.

A fresh database right after an import, or a partitioned parent (which autovacuum never
analyzes), has no statistics; the planner then prices every index alike, and a statement it
plans on the wrong one reads the conversation's every row for each row it returns (a view
read of 1,120 events once took 175-200 ms that way instead of 10-20). So each statement of
an append (the fast path's and one with a condensation), a view read now and as of a seq, a
page, ``in_view``, a resume, the log, a fork and the fork's reads, and ``verify`` of one
conversation, on a store whose tables autovacuum never touched, is captured at the driver and
planned again: no sequential scan of a store table, and, executed, no more rows thrown away by
its filters than twice what it returns and the live view's length (a resume passes over the
live rows in the stretch it reads; a summary is found among the live rows), with the
exceptions named below. The history is ten times the view, so a plan that reads the
conversation's log for each row, or once with the keys as a filter, throws away far more.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy import event

from benchmarks.bench_statistics import analyzed_tables, no_autovacuum
from viewstore import EventStore

from ._helpers import A, C, O, U

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

_TABLES = ("conversations", "events", "view_entries", "manipulation_indices", "condensations")
_STATEMENTS = ("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")
#: Rows a plan may throw away beyond twice what it returns and the live view's length.
_SLACK = 64
#: Rows a plan may read, each table's apart, for each it returns: a view row and its log row,
#: a key and its row.
_READ = 3
#: The statement that reads more than that, still through an index: an as-of read takes the
#: view's rows that entered by its seq, among them those that left before it (docs/schema.md,
#: "view_entries").
_EXEMPT = ("v.entered_seq <= ",)


def _history(store: EventStore, key: str, batches: int) -> None:
    """Tool-call batches, a condensation every 25 that forgets all but the last 40 events:
    a long log, a short live view and many rows that left it."""
    events: list[dict[str, Any]] = [U(f"{key}-u")]
    view = [f"{key}-u"]
    for n in range(batches):
        ids = [f"{key}-a{n}", f"{key}-b{n}", f"{key}-o{n}", f"{key}-p{n}"]
        events += [
            A(ids[0], f"{key}-t{n}", f"{key}-r{n}"),
            A(ids[1], f"{key}-s{n}", f"{key}-r{n}"),
            O(ids[2], f"{key}-t{n}"),
            O(ids[3], f"{key}-s{n}"),
        ]
        view += ids
        if n and n % 25 == 0:
            events.append(C(f"{key}-c{n}", forget=view[1:-40], summary=f"until {n}"))
            view = [view[0], *view[-40:]]
    for start in range(0, len(events), 250):
        store.append(key, events[start : start + 250])


@contextmanager
def _captured(store: EventStore) -> Iterator[list[tuple[str, Any]]]:
    """Every statement the store sends its driver, with its parameters, through SQLAlchemy
    or on the driver directly (the view reads and the fast path go there)."""
    found: list[tuple[str, Any]] = []

    class Recording(psycopg.Cursor):  # type: ignore[type-arg]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            if isinstance(query, str) and query.lstrip().upper().startswith(_STATEMENTS):
                found.append((query, params))
            return super().execute(query, params, **kwargs)

    def install(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.cursor_factory = Recording

    store.engine.dispose()
    event.listen(store.engine, "connect", install)
    try:
        yield found
    finally:
        event.remove(store.engine, "connect", install)
        store.engine.dispose()


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for inner in plan.get("Plans", []):
        yield from _nodes(inner)


_SCANS = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")


def _read(node: dict[str, Any]) -> float:
    """The rows a scan of a store table read: those it passed on, and those its filters
    dropped (a page of the log read by sorting the whole tail passes on every row it read)."""
    if (
        node["Node Type"] not in _SCANS
        or node.get("Relation Name", "").split("_p")[0] not in _TABLES
    ):
        return 0.0
    return float(node.get("Actual Rows", 0)) * node.get("Actual Loops", 1) + _thrown_away(node)


def _thrown_away(node: dict[str, Any]) -> float:
    removed = sum(
        node.get(name, 0)
        for name in (
            "Rows Removed by Filter",
            "Rows Removed by Index Recheck",
            "Rows Removed by Join Filter",
        )
    )
    return float(removed) * node.get("Actual Loops", 1)


def _check(store: EventStore, sql: str, params: Any, view: int) -> str | None:
    """What is wrong with the statement's plan, or None."""
    writes = not sql.lstrip().upper().startswith("SELECT")
    explain = "EXPLAIN (FORMAT JSON) " if writes else "EXPLAIN (ANALYZE, FORMAT JSON) "
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(explain + sql, params)
        (document,) = cursor.fetchone()
        raw.rollback()
    finally:
        raw.close()
    plan = (document if isinstance(document, list) else json.loads(document))[0]["Plan"]
    said = f"{sql[:300]}\n{json.dumps(plan, indent=1)[:3000]}"
    for node in _nodes(plan):
        relation = node.get("Relation Name", "")
        if node["Node Type"] == "Seq Scan" and relation.split("_p")[0] in _TABLES:
            return f"a sequential scan of {relation}: {said}"
    if writes or any(exempt in sql for exempt in _EXEMPT):
        return None
    returned = plan["Actual Rows"] * plan.get("Actual Loops", 1)
    thrown = sum(_thrown_away(node) for node in _nodes(plan))
    if thrown > 2 * returned + view + _SLACK:
        return f"{thrown} rows thrown away for {returned}: {said}"
    read = sum(_read(node) for node in _nodes(plan))
    if read > _READ * returned + view + _SLACK:
        return f"{read} rows read for {returned}: {said}"
    return None


_OPERATIONS: dict[str, Callable[[EventStore], object]] = {
    "append, fast path": lambda s: s.append("long", [U("one-more")]),
    "append with a condensation": lambda s: s.append(
        "long", [A("x1", "tx", "rx"), O("x2", "tx"), C("x3", forget=["x1", "x2"])]
    ),
    "view": lambda s: s.view("long"),
    "view as of": lambda s: s.view("long", as_of=1200),
    "view page": lambda s: s.view_page("long", limit=20),
    "in_view": lambda s: s.in_view("long", ["long-a3", "long-a440", "long-c425-summary", "no"]),
    "resume": lambda s: s.resume_view("long", skip_state_updates=True),
    "events": lambda s: s.events("long", after=900, limit=50),
    "fork": lambda s: s.fork("long", 1300, "forked"),
    "fork's view": lambda s: s.view("forked"),
    "fork's resume": lambda s: s.resume_view("forked", skip_state_updates=True),
    "verify": lambda s: s.verify("long"),
}


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres", "postgres_partitioned"], indirect=True)
def test_statements_keep_their_index_plans_without_statistics(store: EventStore) -> None:
    no_autovacuum(store)
    for n in range(6):
        _history(store, f"other{n}", 40)
    _history(store, "long", 450)  # 1,800 events and more, 17 condensations
    assert analyzed_tables(store) == []
    view = len(store.view("long").event_ids)
    assert view * 10 < store.version("long")
    problems: list[str] = []
    for name, operation in _OPERATIONS.items():
        with _captured(store) as statements:
            operation(store)
        assert statements, name
        for sql, params in statements:
            problem = _check(store, sql, params, view)
            if problem is not None:
                problems.append(f"{name}: {problem}")
    assert analyzed_tables(store) == []
    assert not problems, "\n\n".join(problems)
