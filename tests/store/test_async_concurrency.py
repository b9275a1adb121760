"""AsyncEventStore under many tasks of one event loop, on SQLite (aiosqlite) and PostgreSQL
(psycopg's asyncio connection): every event stored exactly once, ``verify`` clean, and the
same when tasks are cancelled at random points of their appends (each append then all or
nothing, and the pool still serving)."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from viewstore import AsyncEventStore

from ..ops._helpers import message

TASKS = 200
CONVERSATIONS = 20
APPENDS = 3  # per task
SEED = 20261125


def conversation_of(task: int) -> str:
    return f"conv-{task % CONVERSATIONS}"


def batch(task: int, step: int, size: int) -> list[dict[str, object]]:
    return [message(f"t{task}-s{step}-e{n}", f"task {task} step {step}") for n in range(size)]


async def log_counts(store: AsyncEventStore) -> dict[str, Counter[str]]:
    """How many times each event id is in each conversation's log."""
    counts: dict[str, Counter[str]] = {}
    for conversation in await store.conversation_ids():
        counts[conversation] = Counter(e.event_id for e in await store.events(conversation))
    return counts


async def check_store(store: AsyncEventStore) -> None:
    report = await store.verify()
    assert report.ok, report.problems
    assert len(report.conversations) == CONVERSATIONS
    for conversation in await store.conversation_ids():
        assert await store.live_equals_resume(conversation)


def test_200_tasks_append_to_20_conversations_each_event_once(db_url: str) -> None:
    async def main() -> None:
        async with AsyncEventStore(db_url) as store:
            await store.create_schema()
            results = await asyncio.gather(
                *(worker(store, task) for task in range(TASKS)), return_exceptions=True
            )
            failures = [r for r in results if isinstance(r, BaseException)]
            assert not failures, failures[:3]
            counts = await log_counts(store)
            expected = {
                f"t{task}-s{step}-e{n}": conversation_of(task)
                for task in range(TASKS)
                for step in range(APPENDS)
                for n in range(1 + step % 2)
            }
            for event_id, conversation in expected.items():
                assert counts[conversation][event_id] == 1, event_id
            assert sum(sum(c.values()) for c in counts.values()) == len(expected)
            await check_store(store)

    async def worker(store: AsyncEventStore, task: int) -> None:
        for step in range(APPENDS):
            result = await store.append(conversation_of(task), batch(task, step, 1 + step % 2))
            assert result.appended == [f"t{task}-s{step}-e{n}" for n in range(1 + step % 2)]

    asyncio.run(main())


#: Rounds of the cancellation test, each with its own seed. Before the store ran its calls in
#: tasks of their own (viewstore/aio/calls.py), a like run hung in 3 of about 130 tries: a pooled
#: connection kept SQLite's write lock and the loop waited for good (docs/asyncio.md). A round
#: takes about a second.
ROUNDS = 6
#: A round that has not ended by then has hung: fail, rather than hang the suite.
ROUND_TIMEOUT = 120.0


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_cancelled_appends_are_all_or_nothing_and_leave_the_pool_usable(
    db_url: str, round_: int
) -> None:
    """Tasks cancelled at random points (a timeout of 0 to 100 ms around half the appends, and
    ``cancel()`` from outside after a random delay, often twice in a row so that a task's
    unwinding is cut as well): each append that returned is stored once, each that was
    cancelled is stored whole or not at all, nothing is stored twice, and the store serves on
    (and after ``close()``, which waits for the calls cancelled callers left running)."""
    rng = random.Random(SEED + round_)
    returned: list[list[str]] = []
    cancelled: list[list[str]] = []

    async def main() -> None:
        async with AsyncEventStore(db_url) as store:
            await store.create_schema()
            tasks = [asyncio.create_task(worker(store, task)) for task in range(TASKS)]
            for _ in range(TASKS // 2):  # and some cancelled from outside, anywhere
                await asyncio.sleep(rng.uniform(0, 0.01))
                chosen = rng.choice(tasks)
                chosen.cancel()
                if rng.random() < 0.5:
                    await asyncio.sleep(0)
                    chosen.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            assert cancelled, "no append was cancelled: the test proves nothing"
            assert returned, "no append went through: the test proves nothing"
            await store.settle()  # the appends cancelled callers left, ended
            await check_outcome(store)
            # The pool still serves: a fresh append and a read on every conversation.
            for number in range(CONVERSATIONS):
                conversation = f"conv-{number}"
                result = await store.append(conversation, [message(f"after-{number}")])
                view = await store.view(conversation)
                assert view.version == result.version
            await check_store(store)
            await store.settle()
            assert store.engine.sync_engine.pool.checkedout() == 0  # every connection back

    async def check_outcome(store: AsyncEventStore) -> None:
        counts = await log_counts(store)
        stored = Counter[str]()
        for per_conversation in counts.values():
            stored.update(per_conversation)
        assert max(stored.values()) == 1  # nothing twice
        for ids in returned:
            assert all(stored[i] == 1 for i in ids), ids
        for ids in cancelled:
            assert len({stored[i] for i in ids}) == 1, ids  # all or nothing
        whole = sum(1 for ids in cancelled if stored[ids[0]])
        print(f"{len(returned)} returned, {len(cancelled)} cancelled ({whole} stored whole)")

    def timeout() -> float | None:
        return None if rng.random() < 0.5 else rng.uniform(0, 0.1)

    async def worker(store: AsyncEventStore, task: int) -> None:
        for step in range(APPENDS):
            ids_batch = batch(task, step, 3)
            ids = [str(e["id"]) for e in ids_batch]
            try:
                await asyncio.wait_for(store.append(conversation_of(task), ids_batch), timeout())
            except (TimeoutError, asyncio.CancelledError):
                cancelled.append(ids)
                raise
            returned.append(ids)

    async def bounded() -> None:
        await asyncio.wait_for(main(), ROUND_TIMEOUT)

    asyncio.run(bounded())


def test_a_cancelled_begin_block_rolls_back_whole(db_url: str) -> None:
    """A task cancelled inside ``begin()``, between or during its appends, leaves none of the
    block's events; one cancelled while the block commits leaves all or none; the store serves
    on."""
    rng = random.Random(SEED)
    blocks: list[list[str]] = []

    async def main() -> None:
        async with AsyncEventStore(db_url) as store:
            await store.create_schema()

            async def block(number: int) -> None:
                ids = [f"b{number}-{n}" for n in range(4)]
                blocks.append(ids)
                async with store.begin() as conn:
                    for event_id in ids:
                        await store.append(
                            f"conv-{number % 5}", [message(event_id)], connection=conn
                        )
                        await asyncio.sleep(0)

            tasks = [asyncio.create_task(block(number)) for number in range(40)]
            for _ in range(40):
                await asyncio.sleep(rng.uniform(0, 0.005))
                rng.choice(tasks).cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            counts = await log_counts(store)
            stored = Counter[str]()
            for per_conversation in counts.values():
                stored.update(per_conversation)
            assert max(stored.values(), default=0) <= 1
            for ids in blocks:
                assert len({stored[i] for i in ids}) == 1, ids  # the block whole or not at all
            for number in range(5):
                await store.append(f"conv-{number}", [message(f"after-{number}")])
            report = await store.verify()
            assert report.ok, report.problems
            await store.settle()  # blocks whose callers left them may still be entering
            assert store.engine.sync_engine.pool.checkedout() == 0

    async def bounded() -> None:
        await asyncio.wait_for(main(), ROUND_TIMEOUT)

    asyncio.run(bounded())
