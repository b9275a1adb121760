"""What AsyncEventStore offers beyond running EventStore's methods (those run the contract
suites: ``ASYNC_TOO``): the same method set and signatures, the caller's transaction as an
``AsyncConnection``, the conversation lock and ``append_with_retry`` shared by many tasks of
one loop, and the SQLite settings on aiosqlite connections."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.ext.asyncio import create_async_engine as sqlalchemy_async_engine

from viewstore import (
    AsyncEventStore,
    ConcurrencyError,
    EventStore,
    InvalidArgumentError,
    StoredView,
    UnsupportedDatabaseError,
)
from viewstore.aio import append_with_retry, async_url, create_async_engine

from ..ops._helpers import message

#: Context managers in both stores (``async with`` here), not coroutines.
ENTERED = {"begin", "conversation_lock"}
#: Iterators in both stores (``async for`` here): a plain method returning an async generator.
ITERATORS = {"follow"}


def public_methods(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def test_every_method_of_eventstore_is_offered_with_its_arguments() -> None:
    missing = public_methods(EventStore) - public_methods(AsyncEventStore)
    assert not missing
    for name in public_methods(EventStore) - {"close"}:
        sync, shell = getattr(EventStore, name), getattr(AsyncEventStore, name)
        if name in ENTERED:
            assert inspect.isasyncgenfunction(inspect.unwrap(shell)), name
        elif name in ITERATORS:
            assert inspect.isasyncgenfunction(getattr(AsyncEventStore, f"_{name}")), name
        else:
            assert inspect.iscoroutinefunction(shell), name
        wanted = [(p.name, p.kind, p.default) for p in inspect.signature(sync).parameters.values()]
        found = [(p.name, p.kind, p.default) for p in inspect.signature(shell).parameters.values()]
        assert found == wanted, name


def test_urls_of_either_store_serve_and_others_are_refused(tmp_path: Path) -> None:
    assert async_url(f"sqlite:///{tmp_path}/a.db").drivername == "sqlite+aiosqlite"
    assert async_url("postgresql://u@h/d").drivername == "postgresql+psycopg_async"
    assert async_url("postgresql+psycopg://u@h/d").drivername == "postgresql+psycopg_async"
    with pytest.raises(UnsupportedDatabaseError):
        AsyncEventStore("mysql+aiomysql://u@h/d")
    with pytest.raises(UnsupportedDatabaseError):  # the blocking store wants a blocking driver
        EventStore(f"sqlite+aiosqlite:///{tmp_path}/b.db")
    plain = sqlalchemy_async_engine(f"sqlite+aiosqlite:///{tmp_path}/c.db")
    with pytest.raises(UnsupportedDatabaseError):  # an asyncio engine made elsewhere
        EventStore(plain.sync_engine)
    with pytest.raises(UnsupportedDatabaseError):
        AsyncEventStore(plain)
    EventStore(create_async_engine(f"sqlite:///{tmp_path}/c.db").sync_engine)  # set up: taken
    with pytest.raises(InvalidArgumentError, match="schema"):
        AsyncEventStore(f"sqlite:///{tmp_path}/d.db", schema="x")


def test_aiosqlite_connections_get_the_store_settings_and_writers_take_the_lock(
    sqlite_url: str,
) -> None:
    path = sqlite_url.removeprefix("sqlite:///")

    async def main() -> None:
        async with AsyncEventStore(sqlite_url) as store:
            await store.create_schema()
            async with store.engine.connect() as conn:
                pragmas = [
                    (await conn.exec_driver_sql(f"PRAGMA {name}")).scalar()
                    for name in ("busy_timeout", "journal_mode", "synchronous", "foreign_keys")
                ]
            assert pragmas == [30_000, "wal", 1, 1]
            # A write transaction holds SQLite's write lock from its BEGIN on: another
            # writer that will not wait is refused at once, before anything was written.
            async with store.begin():
                other = sqlite3.connect(path, timeout=0, isolation_level=None)
                try:
                    with pytest.raises(sqlite3.OperationalError, match="locked"):
                        other.execute("BEGIN IMMEDIATE")
                finally:
                    other.close()

    asyncio.run(main())


def test_the_callers_transaction_commits_or_rolls_back_with_the_events(db_url: str) -> None:
    async def main() -> None:
        async with AsyncEventStore(db_url) as store:
            await store.create_schema()
            async with store.begin() as conn:
                await conn.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY)"))
            async with store.begin() as conn:
                await conn.execute(text("INSERT INTO orders VALUES (1)"))
                result = await store.append("c", [message("m1")], connection=conn)
            assert result.version == 1
            with pytest.raises(RuntimeError):
                async with store.begin() as conn:
                    await conn.execute(text("INSERT INTO orders VALUES (2)"))
                    await store.append("c", [message("m2")], connection=conn)
                    raise RuntimeError("the caller changes its mind")
            async with AsyncSession(store.engine) as session, session.begin():
                await session.execute(text("INSERT INTO orders VALUES (3)"))
                await store.append("c", [message("m3")], connection=session)
            # A failed append inside leaves the caller's transaction going on.
            async with store.begin() as conn:
                with pytest.raises(ConcurrencyError):
                    await store.append("c", [message("m4")], connection=conn, expected_version=0)
                await conn.execute(text("INSERT INTO orders VALUES (4)"))
            async with store.engine.connect() as conn:
                orders = (await conn.execute(text("SELECT id FROM orders ORDER BY id"))).all()
            assert [row[0] for row in orders] == [1, 3, 4]
            assert [e.event_id for e in await store.events("c")] == ["m1", "m3"]
            assert (await store.verify()).ok

    asyncio.run(main())


def test_tasks_of_one_loop_take_turns_at_the_conversation_lock(db_url: str) -> None:
    """The lock excludes the other tasks of the same loop, and waiting for it never stops the
    loop: the holder goes on running (on SQLite the lock is a thread lock, which tasks of one
    thread share: a blocking wait would hang here until the timeout)."""
    inside: list[int] = []
    overlaps: list[int] = []

    async def main() -> None:
        async with AsyncEventStore(db_url) as store:
            await store.create_schema()
            await asyncio.wait_for(asyncio.gather(*(hold(store, n) for n in range(8))), 20)
            with pytest.raises(TimeoutError):  # a holder keeps it; a short wait gives up
                async with (
                    store.conversation_lock("c"),
                    store.conversation_lock("c", timeout=0.05),
                ):
                    pass

    async def hold(store: AsyncEventStore, number: int) -> None:
        async with store.conversation_lock("c", timeout=10):
            if inside:
                overlaps.append(number)
            inside.append(number)
            await asyncio.sleep(0.02)  # the loop runs the others meanwhile
            await store.append("c", [message(f"m{number}")])
            inside.remove(number)

    asyncio.run(main())
    assert not overlaps


def test_append_with_retry_from_many_tasks_settles_every_conflict(db_url: str) -> None:
    conflicts: list[int] = []

    def decider(task: int) -> Callable[[StoredView | None], list[dict[str, object]]]:
        def decide(view: StoredView | None) -> list[dict[str, object]]:
            version = 0 if view is None else view.version
            return [message(f"task{task}-after-{version}")]  # says what it was decided on

        return decide

    async def main() -> None:
        async with AsyncEventStore(db_url) as store:
            await store.create_schema()
            results = await asyncio.gather(
                *(
                    append_with_retry(
                        store, "c", decider(task), attempts=200, backoff=0.001,
                        max_backoff=0.02,
                        on_conflict=lambda _error, attempt: conflicts.append(attempt),
                    )
                    for task in range(12)
                )
            )  # fmt: skip
            assert sorted(r.version for r in results) == list(range(1, 13))
            ids = [e.event_id for e in await store.events("c")]
            assert sorted(i.split("-")[0] for i in ids) == sorted(f"task{t}" for t in range(12))
            assert [i.split("-after-")[1] for i in ids] == [str(n) for n in range(12)]

    asyncio.run(main())
    assert conflicts  # they did collide, and the backoff let the loop run the others


def test_follow_delivers_each_commit_once_and_checks_its_arguments(db_url: str) -> None:
    async def scenario() -> None:
        async with AsyncEventStore(db_url) as store:
            await store.create_schema()
            await store.append("f1", [message("m0")])
            with pytest.raises(InvalidArgumentError):
                store.follow(None, poll=-1)
            entries = store.follow(None, poll=0.2)
            seen: list[tuple[str, int]] = []

            async def consume() -> None:
                async for entry in entries:
                    seen.append((entry.conversation_id, entry.seq))
                    if len(seen) == 7:
                        return

            consumer = asyncio.create_task(consume())
            for i in range(1, 4):
                await store.append("f1", [message(f"m{i}")])
                await store.append("f2", [message(f"n{i}")])
            await asyncio.wait_for(consumer, timeout=60)
            await entries.aclose()
            wanted = [("f1", seq) for seq in range(1, 5)] + [("f2", seq) for seq in range(1, 4)]
            assert sorted(seen) == wanted

    asyncio.run(scenario())


@pytest.mark.parametrize("whole", [True, False], ids=["one hand-off", "a call at a time"])
def test_the_sqlite_fast_path_is_the_same_sent_whole_or_call_by_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole: bool
) -> None:
    """The SQLite fast path's transaction, and a base-state save's, go to aiosqlite's thread in
    one hand-off, or (where aiosqlite's private calls are missing) one call at a time: the same
    rows either way, a stale tail and a stored id still refused by the transaction, nothing
    left open."""
    from viewstore.store.database import aiosqlite_thread as aio_sqlite  # noqa: PLC0415

    monkeypatch.setattr(aio_sqlite, "WHOLE", whole)
    sent = []
    run_on_thread = aio_sqlite.run_on_thread

    def counted(connection: Any, fn: Callable[[Any], bool]) -> bool:
        sent.append(fn)
        return run_on_thread(connection, fn)

    monkeypatch.setattr(aio_sqlite, "run_on_thread", counted)

    async def main() -> None:
        async with AsyncEventStore(f"sqlite:///{tmp_path / 'a.db'}") as store:
            await store.create_schema()
            for n in range(20):
                result = await store.append("c", [message(f"m{n}")])
                assert result.appended == [f"m{n}"]
            again = await store.append("c", [message("m3")])  # a stored id: the locked path
            assert again.appended == [] and again.duplicates == ["m3"]
            assert store.engine.sync_engine.pool.checkedout() == 0
            report = await store.verify()
            assert report.ok, report.problems
            assert [e.event_id for e in await store.events("c")] == [f"m{n}" for n in range(20)]
            # A base-state save goes the same way once a state is stored (round_trip.py).
            await store.save_base_state("c", "{}", at_version=20)
            before = len(sent)
            assert await store.save_base_state("c", '{"n": 2}', at_version=20) == 2
            assert len(sent) == before + 1
            state = await store.base_state("c")
            assert state is not None and (state.payload, state.revision) == ('{"n": 2}', 2)
            assert store.engine.sync_engine.pool.checkedout() == 0

    asyncio.run(main())
    assert len(sent) >= 19  # the fast path ran (the first append takes the locked path)
    with EventStore(f"sqlite:///{tmp_path / 'a.db'}") as blocking:  # a writer after: none open
        blocking.append("c", [message("after")])
        assert blocking.version("c") == 21
