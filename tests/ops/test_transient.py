"""Which failures are transient: a lock held beyond the wait the store allows, a deadlock, a
serialization failure, a session the server ended. Each is produced for real; the store must
raise ``TransientStorageError`` (retrying may pass) and ``append_with_retry`` must retry it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import create_engine, exc, text
from sqlalchemy.engine import Connection, make_url

from viewstore import EventStore, StorageError, TransientStorageError, append_with_retry
from viewstore.store.database.translate import translate

from ._helpers import is_postgres, message

SHORT_WAIT_MS = 100


def _short_wait(url: str) -> str:
    """The URL with lock waits cut to SHORT_WAIT_MS (SQLite's busy timeout, PostgreSQL's
    lock_timeout), so a held lock fails fast instead of after the default 30 s."""
    parsed = make_url(url)
    if is_postgres(url):
        parsed = parsed.update_query_dict({"options": f"-c lock_timeout={SHORT_WAIT_MS}"})
    else:
        parsed = parsed.update_query_dict({"timeout": str(SHORT_WAIT_MS / 1000)})
    return parsed.render_as_string(hide_password=False)


@contextmanager
def _write_lock(url: str, conversation: str) -> Iterator[None]:
    """Hold what an append to ``conversation`` must wait for: SQLite's write lock, the
    conversation's row lock on PostgreSQL."""
    if not is_postgres(url):
        holder = sqlite3.connect(make_url(url).database or "", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text("SELECT id FROM conversations WHERE id = :c FOR UPDATE"), {"c": conversation}
            )
            yield
    finally:
        engine.dispose()


@pytest.mark.parametrize("path", ["locked", "fast"])
def test_a_lock_held_beyond_the_wait_is_transient(db_url: str, path: str) -> None:
    with EventStore(db_url) as setup:
        setup.create_schema()
        setup.append("c", [message("m1")])
    with EventStore(_short_wait(db_url)) as store:
        if path == "fast":
            store.append("c", [message("m2")])  # the store now holds c's tail
        before = store.version("c")
        with _write_lock(db_url, "c"), pytest.raises(TransientStorageError):
            store.append("c", [message("blocked")])
        assert store.version("c") == before  # nothing was written
        store.append("c", [message("after")])
        assert [e.event_id for e in store.events("c")][-1] == "after"


def test_append_with_retry_waits_out_a_held_lock(db_url: str) -> None:
    with EventStore(db_url) as setup:
        setup.create_schema()
        setup.append("c", [message("m1")])
    with EventStore(_short_wait(db_url)) as store:
        transient: list[TransientStorageError] = []
        locked, release = threading.Event(), threading.Event()

        def hold() -> None:
            with _write_lock(db_url, "c"):
                locked.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        locked.wait(10)

        def on_transient(error: TransientStorageError, attempt: int) -> None:
            transient.append(error)
            release.set()  # the lock goes away while the loop backs off

        try:
            result = append_with_retry(
                store, "c", lambda view: [message("m2")], on_transient=on_transient
            )
        finally:
            release.set()
            holder.join()
        assert result.appended == ["m2"]
        assert len(transient) >= 1
        assert [e.event_id for e in store.events("c")] == ["m1", "m2"]


def test_a_permanent_error_is_not_retried(empty_db_url: str) -> None:
    """A failure that says something about the request (here: no schema) is raised at once."""
    with EventStore(empty_db_url) as store:
        retried: list[int] = []
        with pytest.raises(StorageError) as raised:
            append_with_retry(
                store,
                "c",
                lambda view: [message("m1")],
                on_transient=lambda error, attempt: retried.append(attempt),
            )
        assert not isinstance(raised.value, TransientStorageError)
        assert retried == []


# -- PostgreSQL failures produced for real, classified by the one translation ---------------


def _error_of(run: Any) -> exc.DBAPIError:
    try:
        run()
    except exc.DBAPIError as error:
        return error
    raise AssertionError("no error")


def _deadlock(url: str) -> exc.DBAPIError:
    engine = create_engine(url)
    errors: list[exc.DBAPIError] = []
    barrier = threading.Barrier(2)

    def lock_both(first: int, second: int) -> None:
        with engine.connect() as conn, conn.begin():
            conn.execute(text("SET deadlock_timeout = '50ms'"))
            _lock(conn, first)
            barrier.wait(10)
            try:
                _lock(conn, second)
            except exc.DBAPIError as error:
                errors.append(error)

    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE locks (id int PRIMARY KEY)"))
        conn.execute(text("INSERT INTO locks VALUES (1), (2)"))
    threads = [threading.Thread(target=lock_both, args=p) for p in ((1, 2), (2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()
    assert len(errors) == 1  # PostgreSQL ends one of the two
    return errors[0]


def _lock(conn: Connection, row: int) -> None:
    conn.execute(text("SELECT id FROM locks WHERE id = :i FOR UPDATE"), {"i": row})


def _serialization_failure(url: str) -> exc.DBAPIError:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE counter (n int)"))
        conn.execute(text("INSERT INTO counter VALUES (0)"))
    first = engine.connect().execution_options(isolation_level="REPEATABLE READ")
    second = engine.connect().execution_options(isolation_level="REPEATABLE READ")
    try:
        first.begin()
        first.execute(text("SELECT n FROM counter"))  # the snapshot is taken here
        with second.begin():
            second.execute(text("UPDATE counter SET n = n + 1"))
        return _error_of(lambda: first.execute(text("UPDATE counter SET n = n + 1")))
    finally:
        first.close()
        second.close()
        engine.dispose()


def _session_ended(url: str) -> exc.DBAPIError:
    engine = create_engine(url)
    with engine.connect() as victim:
        pid = victim.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as killer:
            killer.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        error = _error_of(lambda: victim.execute(text("SELECT 1")))
    engine.dispose()
    return error


@pytest.mark.postgres
@pytest.mark.parametrize(
    "produce, sqlstate",
    [(_deadlock, "40P01"), (_serialization_failure, "40001"), (_session_ended, "57P01")],
)
def test_postgresql_transient_failures(fresh_pg_url: str, produce: Any, sqlstate: str) -> None:
    error = produce(fresh_pg_url)
    assert getattr(error.orig, "sqlstate", None) == sqlstate
    assert isinstance(translate(error), TransientStorageError)


@pytest.mark.postgres
def test_a_constraint_violation_is_permanent(fresh_pg_url: str) -> None:
    engine = create_engine(fresh_pg_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id int PRIMARY KEY)"))
        conn.execute(text("INSERT INTO t VALUES (1)"))
    with engine.connect() as conn:
        error = _error_of(lambda: conn.execute(text("INSERT INTO t VALUES (1)")))
    engine.dispose()
    translated = translate(error)
    assert type(translated) is StorageError
