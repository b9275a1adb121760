"""An online revision's instant DDL never deadlocks the transactions going on (PostgreSQL;
migrations/online.py, issue 37). It locks the tables it alters in the order
an append takes them, so an append holding the log gets the view rows and ends while the DDL
waits; and it waits at most ``LOCK_TIMEOUT_MS`` a lock, so a reader that holds the view rows
and then reads the log (the other order) is not cancelled as a deadlock's victim: the DDL
gives way and tries again."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import Connection, text
from viewstore._migrations import online

from viewstore import EventStore

from ..store._helpers import A, O, S, U, layout_url

# Takes view_entries' ACCESS EXCLUSIVE lock and changes nothing: kind is nullable at head.
_DDL = "ALTER TABLE view_entries ALTER COLUMN kind DROP NOT NULL"
_WAITING = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND wait_event_type = 'Lock' AND query LIKE 'LOCK TABLE%'"
)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> EventStore:
    url, _ = layout_url(request, "postgres")
    opened = EventStore(url)
    request.addfinalizer(opened.close)
    opened.create_schema()
    opened.append("c", [S(), U("u"), A("a", "t", "r"), O("o", "t")])
    return opened


def count(store: EventStore, sql: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def ddl_meanwhile(store: EventStore, other: Connection, then: Callable[[], object]) -> int:
    """Run the DDL in another thread while ``other`` holds what it has locked; once the DDL
    waits for a lock, call ``then`` (more of ``other``'s transaction) and commit it. Returns
    the DDL's attempts."""
    attempts: list[int] = []
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            with store.engine.connect() as conn:
                ddl = lambda: conn.exec_driver_sql(_DDL)  # noqa: E731 - one statement
                attempts.append(online.run_alone(conn, ddl, ("events", "view_entries")))
        except BaseException as error:  # reported by the test below
            errors.append(error)

    thread = threading.Thread(target=migrate)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        # A transaction each time: PostgreSQL shows pg_stat_activity as of its first read.
        while not count(store, _WAITING):
            assert time.monotonic() < deadline, "the DDL never waited"
            time.sleep(0.005)
        then()
        other.commit()
    finally:
        thread.join(timeout=60)
    assert not errors, errors
    return attempts[0]


def test_an_append_holding_the_log_gets_the_view_rows_and_ends(store: EventStore) -> None:
    with store.engine.connect() as append:
        append.execute(text("LOCK TABLE events IN ROW EXCLUSIVE MODE"))  # its event written

        def view_rows() -> None:  # the append's next step, while the DDL waits: not held
            append.execute(text("LOCK TABLE view_entries IN ROW EXCLUSIVE MODE NOWAIT"))

        assert ddl_meanwhile(store, append, view_rows) >= 1
    assert store.verify().ok


def test_a_reader_holding_the_view_rows_reads_the_log(store: EventStore) -> None:
    with store.engine.connect() as reader:
        reader.execute(text("SELECT count(*) FROM view_entries")).scalar_one()
        attempts = ddl_meanwhile(
            store, reader, lambda: reader.execute(text("SELECT count(*) FROM events")).scalar_one()
        )
    assert attempts >= 2  # it gave way to the reader at least once
    assert store.view("c").event_ids == ["S", "u", "a", "o"]
