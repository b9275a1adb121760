"""``store.append(..., connection=conn)``: the events join the caller's transaction, so the
application's own rows and the events commit or roll back together, and the result is the same
as an append in the store's own transaction.

    app row ─┐
             ├─ one transaction: commit → both; rollback → neither
    events  ─┘
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from viewstore import ConcurrencyError, ConversationNotFoundError, EventStore, InvalidArgumentError

from ..store._helpers import A, C, O, R, S, U, count_rows, triple

# The caller's own SQLAlchemy transaction (``connection=``) is the blocking store's alone.
pytestmark = pytest.mark.sync_only

STEPS = [
    [S(), U("u1")],
    [A("a1", "tc1", "r1"), A("a2", "tc2", "r1")],
    [O("o1", "tc1"), O("o2", "tc2")],
    [R("r")],
    [C("c", ["a1", "a2", "o1", "o2"], "ran two tools", 1)],
    [U("u2")],
]


@pytest.fixture
def store(db_url: str) -> Iterator[EventStore]:
    with EventStore(db_url) as opened:
        opened.create_schema()
        with opened.begin() as conn:
            conn.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)"))
        yield opened


def _order(conn: Connection, number: int) -> None:
    conn.execute(text("INSERT INTO orders (id, note) VALUES (:i, 'x')"), {"i": number})


def test_commit_keeps_both_and_the_result_equals_an_ordinary_append(store: EventStore) -> None:
    version = 0
    for number, step in enumerate(STEPS):
        with store.begin() as conn:
            _order(conn, number)
            inside = store.append("mine", step, expected_version=version, connection=conn)
        plain = store.append("plain", step, expected_version=version)
        assert (inside.version, inside.appended, inside.first_seq, inside.rows_written) == (
            plain.version,
            plain.appended,
            plain.first_seq,
            plain.rows_written,
        )
        version = inside.version
        assert triple(store.view("mine")) == triple(store.view("plain"))
    assert count_rows(store.engine, "orders") == len(STEPS)
    for as_of in range(version + 1):
        assert triple(store.view("mine", as_of=as_of)) == triple(store.view("plain", as_of=as_of))
    assert [e.payload for e in store.events("mine")] == [e.payload for e in store.events("plain")]
    assert store.verify().ok


def test_rollback_of_the_callers_transaction_removes_both(store: EventStore) -> None:
    store.append("c", STEPS[0])  # the store now carries a tail for "c"
    with store.engine.connect() as conn:
        transaction = conn.begin()
        _order(conn, 1)
        assert store.append("c", STEPS[1], connection=conn).version == 4
        assert store.append("new", STEPS[0], connection=conn).version == 2
        transaction.rollback()
    assert count_rows(store.engine, "orders") == 0
    assert store.version("c") == 2
    with pytest.raises(ConversationNotFoundError):
        store.version("new")
    # The store's next append to "c" must not build on what was rolled back.
    assert store.append("c", STEPS[1], expected_version=2).version == 4
    assert store.verify().ok


def test_a_session_joins_as_well(store: EventStore) -> None:
    with Session(store.engine) as session:
        session.execute(text("INSERT INTO orders (id, note) VALUES (1, 'kept')"))
        store.append("c", STEPS[0], connection=session)
        session.commit()
    with Session(store.engine) as session:
        session.execute(text("INSERT INTO orders (id, note) VALUES (2, 'gone')"))
        store.append("c", STEPS[1], connection=session)
        session.rollback()
    assert count_rows(store.engine, "orders") == 1
    assert store.view("c").event_ids == ["S", "u1"]


def test_a_failed_append_writes_nothing_and_the_callers_transaction_goes_on(
    store: EventStore,
) -> None:
    store.append("c", STEPS[0])
    with store.begin() as conn:
        _order(conn, 1)
        with pytest.raises(ConcurrencyError):
            store.append("c", STEPS[1], expected_version=0, connection=conn)
        with pytest.raises(ConcurrencyError):
            store.append("fresh", STEPS[0], expected_version=3, connection=conn)
        _order(conn, 2)
        store.append("c", STEPS[1], expected_version=2, connection=conn)
    assert count_rows(store.engine, "orders") == 2
    assert store.version("c") == 4
    with pytest.raises(ConversationNotFoundError):
        store.version("fresh")
    assert store.verify().ok


def test_a_connection_of_a_sqlite_engine_without_the_store_settings_is_refused(
    sqlite_url: str,
) -> None:
    import sqlalchemy  # noqa: PLC0415

    with EventStore(sqlite_url) as store:
        store.create_schema()
        other = sqlalchemy.create_engine(sqlite_url)
        with other.connect() as conn, pytest.raises(InvalidArgumentError, match="settings"):
            store.append("c", STEPS[0], connection=conn)
        other.dispose()
        with pytest.raises(ConversationNotFoundError):
            store.version("c")
