"""Every event field stored in a bounded column is checked against its limit before any write,
on both append paths and both backends alike (viewstore/store/inputs.py), and the PostgreSQL fast
path never truncates a value that gets past the checks (viewstore/store/append/fast_path.py).

Each case appends on the ordinary path (a store's first append to a conversation) and on the
fast path (the next plain append of the same store); a spy on the fast writer proves which.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore, InvalidEventError, StorageError
from viewstore.domain.events import parse_event
from viewstore.store.append import fast_path
from viewstore.store.database.schema import condensation_forgotten, events, view_entries

from ._helpers import C, M, Payload, S, U

CID = "conv"


def _length(column: Any) -> int:
    length: int = column.type.length
    return length


KIND = _length(events.c.kind)
SOURCE = _length(events.c.source)
TIMESTAMP = _length(events.c.timestamp)
PARENT = _length(events.c.parent_id)
FORGOTTEN = _length(condensation_forgotten.c.event_id)
VIEW_ID = _length(view_entries.c.event_id)


def _with(field: str, length: int) -> Callable[[str], Payload]:
    def build(eid: str) -> Payload:
        event = M(eid)
        if field == "kind":  # an unknown kind: kept in the log, ignored by the view
            event = {"kind": "K" * length, "id": eid}
        else:
            event[field] = "x" * length
        return event

    return build


# (field, limit, event builder taking a length and an id): every bounded field a plain append
# can write, so each goes through both paths.
PLAIN_FIELDS = [
    ("kind", KIND),
    ("source", SOURCE),
    ("timestamp", TIMESTAMP),
    ("parent_id", PARENT),
]


class FastSpy:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.committed = 0
        for name in ("write_postgres", "write_sqlite"):
            original = getattr(fast_path, name)

            def wrapped(
                engine: Any, plan: fast_path.Plan, original: Any = original, **options: Any
            ) -> bool:
                ok = bool(original(engine, plan, **options))
                self.committed += ok
                return ok

            monkeypatch.setattr(fast_path, name, wrapped)


def _rows(store: EventStore) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {
            table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("events", "view_entries", "conversations", "condensation_forgotten")
        }


def _consistent(store: EventStore, cid: str, version: int) -> None:
    assert store.version(cid) == version
    assert store.verify().ok, store.verify().render()
    store.rebuild()
    assert store.verify().ok
    assert store.version(cid) == version


@pytest.mark.parametrize(("field", "limit"), PLAIN_FIELDS, ids=[f for f, _ in PLAIN_FIELDS])
def test_an_over_long_field_is_refused_on_both_paths_and_nothing_is_written(
    store: EventStore, monkeypatch: pytest.MonkeyPatch, field: str, limit: int
) -> None:
    spy = FastSpy(monkeypatch)
    build = _with(field, limit + 1)
    # Ordinary path: the conversation's first append.
    with pytest.raises(InvalidEventError) as ordinary:
        store.append(CID, [S(), build("long1")])
    assert (ordinary.value.field, ordinary.value.event_id, ordinary.value.index) == (
        field, "long1", 1,
    )  # fmt: skip
    assert f"the limit is {limit}" in str(ordinary.value)
    assert _rows(store)["events"] == 0
    # Fast path: the same store's next plain append after a committed one.
    store.append(CID, [S(), U("u")])
    before = _rows(store)
    with pytest.raises(InvalidEventError) as fast:
        store.append(CID, [M("m"), build("long2")])
    assert (fast.value.field, fast.value.event_id) == (field, "long2")
    assert _rows(store) == before
    store.append(CID, [M("m")])
    assert spy.committed == 1  # the fast path was there to take, and took the next append
    _consistent(store, CID, 3)


@pytest.mark.parametrize(("field", "limit"), PLAIN_FIELDS, ids=[f for f, _ in PLAIN_FIELDS])
def test_a_field_at_its_limit_is_stored_whole_on_both_paths(
    store: EventStore, monkeypatch: pytest.MonkeyPatch, field: str, limit: int
) -> None:
    spy = FastSpy(monkeypatch)
    build = _with(field, limit)
    store.append(CID, [S(), build("full1")])  # ordinary
    store.append(CID, [build("full2")])  # fast
    assert spy.committed == 1
    column = {"kind": "kind", "parent_id": "parent_id"}.get(field, field)
    with store.engine.connect() as conn:
        stored = (
            conn.execute(
                text(f"SELECT {column} FROM events WHERE event_id LIKE 'full%' ORDER BY seq")
            )
            .scalars()
            .all()
        )
    assert [len(v) for v in stored] == [limit, limit]
    if field != "kind":  # an unknown kind never enters the view
        # A view row keeps no copy of the field (revision 0022): the view reads the log's.
        read = [getattr(e, field) for e in store.view(CID).events if e.id.startswith("full")]
        assert [len(v) for v in read] == [limit, limit]
    _consistent(store, CID, 3)


def test_a_condensation_with_an_over_long_forgotten_id_is_refused(store: EventStore) -> None:
    store.append(CID, [S(), U("u")])
    with pytest.raises(InvalidEventError) as error:
        store.append(CID, [C("c", ["u", "f" * (FORGOTTEN + 1)])])
    assert error.value.field == "forgotten_event_ids"
    assert f"the limit is {FORGOTTEN}" in str(error.value)
    assert _rows(store)["events"] == 2
    store.append(CID, [C("c", ["u", "f" * FORGOTTEN])])
    _consistent(store, CID, 3)


def test_a_condensation_whose_summary_id_is_over_long_is_refused(store: EventStore) -> None:
    # The summary enters the view rows as "<id>-summary", which must fit the view's id column.
    store.append(CID, [S(), U("u")])
    fits = "c" * (VIEW_ID - len("-summary"))
    with pytest.raises(InvalidEventError) as error:
        store.append(CID, [C(fits + "c", ["u"], "a summary", 1)])
    assert error.value.field == "id"
    assert _rows(store)["events"] == 2
    store.append(CID, [C(fits + "c", ["u"])])  # no summary: no summary id, accepted
    store.append(CID, [C(fits, [], "a summary", 1)])
    _consistent(store, CID, 4)


# PostgreSQL only: parametrised so that no SQLite variant exists to skip.
@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_postgres_fast_statement_refuses_rather_than_truncates(
    store: EventStore, db_url: str
) -> None:
    """Past the input checks (a plan built by hand), the database itself must refuse: the fast
    statement's casts carry no length, so the column's own limit applies, as on the ordinary
    path."""
    store.append(CID, [S(), U("u")])
    tail = store._tails.get(CID)
    assert tail is not None
    long = M("long")
    long["timestamp"] = "t" * (TIMESTAMP + 1)
    plan = fast_path.plan(CID, tail, [parse_event(long)], datetime.now(UTC))
    with pytest.raises(StorageError, match="too long"):
        store._write_plan(plan)
    assert _rows(store)["events"] == 2
    _consistent(store, CID, 2)
