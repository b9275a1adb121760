"""Following the change feed (``EventStore.follow``, ``viewstore.store.feed.follow_async``): every
event once under concurrent writers with late commits, no loss or repeat across a killed
connection, and a commit wakes the follower long before its safety-net poll.

The follower runs in a thread of the test and ends when it reads an event of the conversation
``STOP``, which the test appends once it has checked the writers' work: a following iterator
never ends by itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import threading
import time
from collections import Counter
from contextlib import closing

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from viewstore import EventStore, FeedEntry, InvalidArgumentError, append_with_retry
from viewstore.store.feed.follow import channel
from viewstore.store.feed.follow_async import follow_async

from ._cluster import Cluster
from ._helpers import backend, is_postgres, message, settled_feed
from ._workers import feed_writer
from .test_feed import all_events, store_total

#: Also on hash-partitioned tables (tests/conftest.py): the trigger sits on the partitioned log.
PARTITIONED_TOO = True

WRITERS = 3
STEPS = 300  # per writer
LATE = (60, 0.5)  # every 60th append of each writer holds its transaction 0.5 s before commit
STOP = "follow-stop"
DEADLINE = 90.0
FOLLOWER = "viewstore-follower"


class Follower(threading.Thread):
    """``store.follow()`` in a thread, until an event of ``STOP`` comes."""

    def __init__(self, store: EventStore, *, poll: float, after: str | None = None) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.poll = poll
        self.after = after
        self.seen: list[FeedEntry] = []
        self.arrived: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with closing(self.store.follow(self.after, poll=self.poll, limit=50)) as entries:
                for entry in entries:
                    if entry.conversation_id == STOP:
                        return
                    self.seen.append(entry)
                    self.arrived.append(time.monotonic())
        except BaseException as error:  # reported by finish()
            self.error = error

    def finish(self, store: EventStore) -> list[FeedEntry]:
        store.append(STOP, message(f"stop-{time.monotonic_ns()}"))
        self.join(DEADLINE)
        assert not self.is_alive(), "the follower never saw the stop event"
        assert self.error is None, repr(self.error)
        return self.seen


def _wait_for(count: int, follower: Follower) -> float:
    """Seconds until the follower has seen ``count`` events (or gave up, or the deadline)."""
    start = time.monotonic()
    while (
        len(follower.seen) < count and time.monotonic() < start + DEADLINE and follower.is_alive()
    ):
        time.sleep(0.01)
    return time.monotonic() - start


def _check_once(seen: list[FeedEntry], stored: set[tuple[str, int]]) -> tuple[int, int]:
    keys = [(entry.conversation_id, entry.seq) for entry in seen]
    repeated = sum(n - 1 for n in Counter(keys).values())
    missed = len(stored - set(keys))
    assert repeated == 0
    assert missed == 0, sorted(stored - set(keys))[:10]
    assert set(keys) == stored
    return missed, repeated


def test_follow_misses_and_repeats_nothing_under_three_writers(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
    ctx = multiprocessing.get_context("spawn")
    args = [
        (db_url, w, STEPS, [f"follow-{w}-{k}" for k in range(3)] + ["follow-shared"], LATE)
        for w in range(WRITERS)
    ]
    with EventStore(db_url) as store, EventStore(db_url) as follower_store:
        follower = Follower(follower_store, poll=1.0)
        follower.start()
        with ctx.Pool(WRITERS) as pool:
            results = pool.starmap(feed_writer, args)
        errors = [e for result in results for e in result["errors"]]
        assert errors == [], errors[:5]
        held = sum(result["held"] for result in results)
        assert held == WRITERS * (STEPS // LATE[0])
        total = store_total(store)
        _wait_for(total, follower)
        stored = all_events(store)
        seen = follower.finish(store)
    assert len(stored) == WRITERS * STEPS
    missed, repeated = _check_once(seen, stored)
    with capsys.disabled():
        print(
            f"\n[ops] follow {backend(db_url)}: {WRITERS} writers ({held} commits held "
            f"{LATE[1]} s), {len(seen)} events followed, {missed} missed, {repeated} repeated"
        )


def _with_name(url: str, name: str) -> str:
    return (
        make_url(url)
        .update_query_dict({"application_name": name})
        .render_as_string(hide_password=False)
    )


def _kill(url: str, name: str) -> int:
    """Terminate every backend of the database whose application is ``name``."""
    admin = create_engine(url, poolclass=NullPool)
    with admin.connect() as conn:
        killed = conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = :name"
            ),
            {"name": name},
        ).scalar_one()
    admin.dispose()
    return int(killed)


def _listeners(url: str, name: str) -> set[int]:
    admin = create_engine(url, poolclass=NullPool)
    with admin.connect() as conn:
        found = conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = :name AND query LIKE 'LISTEN%'"
            ),
            {"name": name},
        ).all()
    admin.dispose()
    return {pid for (pid,) in found}


def _await_listener(url: str, name: str, other_than: set[int]) -> set[int]:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        found = _listeners(url, name) - other_than
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("no follower listens")


@pytest.mark.postgres
def test_follow_resumes_after_its_connections_are_killed(fresh_pg_url: str) -> None:
    """Every backend of the follower (its listening connection and its pooled ones) is
    terminated twice while events keep coming: it reconnects, listens again, and yields every
    event once. A poll of 30 s: only a renewed LISTEN delivers within the deadline."""
    url = fresh_pg_url
    with EventStore(url) as store, EventStore(_with_name(url, FOLLOWER)) as follower_store:
        store.create_schema()
        follower = Follower(follower_store, poll=30.0)
        follower.start()
        listening = _await_listener(url, FOLLOWER, set())
        appended = 0
        for round_ in range(3):
            for i in range(20):
                store.append(f"kill-{i % 4}", message(f"k{round_}-{i}"))
                appended += 1
            _wait_for(appended, follower)
            assert len(follower.seen) == appended
            if round_ < 2:
                assert _kill(url, FOLLOWER) >= 1
                listening = _await_listener(url, FOLLOWER, listening)
        stored = all_events(store)
        seen = follower.finish(store)
    _check_once(seen, stored)


def test_a_commit_wakes_the_follower_long_before_its_poll(db_url: str) -> None:
    """PostgreSQL (plain and partitioned: the trigger is on the partitioned log): with a
    safety-net poll of 30 s each append still arrives within seconds (not a timing assertion:
    a missing notification would take 30 s). SQLite polls, here with a 1 s bound."""
    url = db_url
    postgres = is_postgres(url)
    followed = _with_name(url, FOLLOWER) if postgres else url
    with EventStore(url) as store, EventStore(followed) as follower_store:
        store.create_schema()
        assert (store._follow_target() is not None) == postgres
        follower = Follower(follower_store, poll=30.0 if postgres else 1.0)
        follower.start()
        if postgres:
            _await_listener(url, FOLLOWER, set())
        delays = []
        for i in range(5):
            committed = time.monotonic()
            store.append("woken", message(f"w{i}"))
            _wait_for(i + 1, follower)
            assert len(follower.seen) == i + 1
            delays.append(follower.arrived[i] - committed)
            time.sleep(0.2)
        follower.finish(store)
    assert max(delays) < 10.0, delays


LONG_SCHEMA = "vs_" + "t" * 50  # past 48 bytes: the channel takes the schema's MD5


@pytest.mark.postgres
def test_the_notification_channel_is_the_stores_schema(fresh_pg_url: str) -> None:
    """Two stores of one database (two schemas, one with a name too long for a channel)
    notify two channels, named alike by the trigger and the follower: the long-named store's
    follower, polling every 30 s, is woken by its commits and follows its own events only."""
    url = fresh_pg_url
    admin = create_engine(url, poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text("CREATE SCHEMA vs_one"))
        conn.execute(text(f"CREATE SCHEMA {LONG_SCHEMA}"))
        conn.commit()
    admin.dispose()
    with (
        EventStore(url, schema="vs_one") as one,
        EventStore(url, schema=LONG_SCHEMA) as two,
        EventStore(_with_name(url, FOLLOWER), schema=LONG_SCHEMA) as two_followed,
    ):
        one.create_schema()
        two.create_schema()
        target_one, target_two = one._follow_target(), two._follow_target()
        assert target_one is not None and target_two is not None
        assert target_one.channel == "viewstore_feed_vs_one"
        digest = hashlib.md5(LONG_SCHEMA.encode()).hexdigest()
        assert target_two.channel == channel(LONG_SCHEMA) == f"viewstore_feed_{digest}"
        follower = Follower(two_followed, poll=30.0)
        follower.start()
        _await_listener(url, FOLLOWER, set())
        for i in range(3):
            one.append("other", message(f"o{i}"))
            two.append("mine", message(f"m{i}"))
            assert _wait_for(i + 1, follower) < 10.0  # woken, not the 30 s poll
        seen = follower.finish(two)
    assert [(e.conversation_id, e.event_id) for e in seen] == [
        ("mine", "m0"),
        ("mine", "m1"),
        ("mine", "m2"),
    ]


def test_follow_checks_its_arguments_before_reading(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        for poll in [0, -1, True, "1", float("nan"), float("inf"), 3601]:
            with pytest.raises(InvalidArgumentError, match="poll"):
                store.follow(poll=poll)  # type: ignore[arg-type]
        for limit in [0, True, 100_001, 2.0]:
            with pytest.raises(InvalidArgumentError, match="limit"):
                store.follow(limit=limit)  # type: ignore[arg-type]
        for bad in ["", "x", "1.2.3", "a=1.2=3"]:
            with pytest.raises(InvalidArgumentError, match="cursor"):
                store.follow(bad)
        store.append("c", [message("e1"), message("e2"), message("e3")])
        first = settled_feed(store, 3)[0]
        with closing(store.follow(first.cursor, poll=0.1, limit=1)) as following:
            rest = [next(following), next(following)]
        assert [e.event_id for e in rest] == ["e2", "e3"]


def test_the_async_follower_yields_the_same_entries(db_url: str) -> None:
    """``follow_async`` over the store's own feed (run in a thread here, as an async store
    would run it): commits made while it waits arrive, each once."""
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("a", [message("a1"), message("a2")])

        async def read(cursor: str | None, limit: int) -> list[FeedEntry]:
            return await asyncio.to_thread(store.feed, cursor, limit)

        async def main() -> list[FeedEntry]:
            target = await asyncio.to_thread(store._follow_target)
            assert (target is not None) == is_postgres(db_url)
            got: list[FeedEntry] = []

            async def write() -> None:
                for i in range(5):
                    await asyncio.sleep(0.1)
                    await asyncio.to_thread(store.append, "b", message(f"b{i}"))

            writer = asyncio.create_task(write())
            following = follow_async(read, target, poll=30.0 if target else 1.0, limit=2)
            async for entry in following:
                got.append(entry)
                if len(got) == 7:
                    break
            await following.aclose()
            await writer
            return got

        got = asyncio.run(asyncio.wait_for(main(), DEADLINE))
    assert [e.event_id for e in got] == ["a1", "a2", "b0", "b1", "b2", "b3", "b4"]


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_follow_goes_on_across_a_server_restart(
    own_cluster: Cluster, own_cluster_url: str, mode: str
) -> None:
    """The server restarts (sessions told to end, or killed outright) between appends: the
    follower backs off, reconnects, listens again and yields every event once."""
    url = own_cluster_url
    with EventStore(url) as store, EventStore(url) as follower_store:
        store.create_schema()
        follower = Follower(follower_store, poll=30.0)
        follower.start()
        appended = 0
        for round_ in range(3):
            for i in range(10):
                append_with_retry(store, f"r-{i % 3}", lambda _v, e=f"r{round_}-{i}": [message(e)])
                appended += 1
            # well under the 30 s poll: the lost connection was noticed and replaced at once
            assert _wait_for(appended, follower) < 20.0
            assert len(follower.seen) == appended
            if round_ < 2:
                own_cluster.restart(mode)
        stored = all_events(store)
        append_with_retry(store, STOP, lambda _v: [message("stop")])
        follower.join(DEADLINE)
        assert not follower.is_alive() and follower.error is None, repr(follower.error)
    _check_once(follower.seen, stored)


def test_following_from_the_tail_yields_only_later_commits(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        assert store.feed_tail() is None
        store.append("before", [message("b1"), message("b2")])
        settled_feed(store, 2)
        tail = store.feed_tail()
        assert tail == store.feed()[-1].cursor
        follower = Follower(store, poll=0.2, after=tail)
        follower.start()
        store.append("after", [message("a1")])
        _wait_for(1, follower)
        seen = follower.finish(store)
    assert [e.event_id for e in seen] == ["a1"]


@pytest.mark.postgres
def test_the_async_follower_resumes_after_its_connection_is_killed(fresh_pg_url: str) -> None:
    """``follow_async`` with a 30 s poll: its listening connection is terminated between two
    rounds of appends, and it listens again and yields every event once."""
    url = fresh_pg_url
    with EventStore(url) as store, EventStore(_with_name(url, FOLLOWER)) as follower_store:
        store.create_schema()

        async def read(cursor: str | None, limit: int) -> list[FeedEntry]:
            return await asyncio.to_thread(follower_store.feed, cursor, limit)

        async def main() -> list[FeedEntry]:
            target = await asyncio.to_thread(follower_store._follow_target)
            got: list[FeedEntry] = []
            following = follow_async(read, target, poll=30.0, limit=7)

            async def rounds() -> None:
                listening = await asyncio.to_thread(_await_listener, url, FOLLOWER, set())
                for round_ in range(2):
                    for i in range(10):
                        await asyncio.to_thread(store.append, "async", message(f"a{round_}-{i}"))
                    while len(got) < 10 * (round_ + 1):
                        await asyncio.sleep(0.02)
                    if round_ == 0:
                        assert await asyncio.to_thread(_kill, url, FOLLOWER) >= 1
                        await asyncio.to_thread(_await_listener, url, FOLLOWER, listening)

            writer = asyncio.create_task(rounds())
            async for entry in following:
                got.append(entry)
                if len(got) == 20:
                    break
            await following.aclose()
            await writer
            return got

        got = asyncio.run(asyncio.wait_for(main(), 25.0))  # well under two 30 s polls
        stored = all_events(store)
    _check_once(got, stored)
