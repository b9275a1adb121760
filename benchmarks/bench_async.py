"""Appends from one event loop (``AsyncEventStore``) against the blocking store driven by a
thread pool, on the same database in the same run (issue 24's goal: async >= threads).

    .venv/bin/python -m benchmarks.bench_async --url URL [--conversations 50] [--appends 40]

Each side appends ``--appends`` single events to each of ``--conversations`` conversations of
its own, one writer per conversation: on the async side a task per conversation, all in one
event loop; on the blocking side a thread per conversation (a pool of that many threads). Each
conversation's first event is stored before the clock starts, so the timed appends are what a
running agent sends (the fast path). Both engines get the same connection pool
(``--pool``). Rounds alternate which side goes first; the figures are the medians of the
rounds' throughputs (events per second), and the ratio is async over threads.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.bench_store import fresh_events, save
from viewstore import AsyncEventStore, EventStore, create_engine
from viewstore.aio import create_async_engine


def _conversations(side: str, count: int) -> list[str]:
    run = uuid.uuid4().hex[:6]
    return [f"{side}-{run}-{n}" for n in range(count)]


def _work(conversations: list[str], appends: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """Each conversation's events: one stored before timing, then ``appends`` timed."""
    return {c: fresh_events(appends + 1, seed + n) for n, c in enumerate(conversations)}


def _rates(events: int, started: float, cpu: float) -> tuple[float, float]:
    """Events per second of wall time, and milliseconds of this process's CPU per event (every
    thread's: the pool's, aiosqlite's)."""
    wall = time.perf_counter() - started
    return events / wall, (time.process_time() - cpu) / events * 1000


def threads_round(
    store: EventStore, pool: ThreadPoolExecutor, count: int, appends: int, seed: int
) -> tuple[float, float]:
    work = _work(_conversations("threads", count), appends, seed)
    list(pool.map(lambda item: store.append(item[0], [item[1][0]]), work.items()))

    def writer(conversation: str, events: list[dict[str, Any]]) -> None:
        for event in events[1:]:
            store.append(conversation, [event])

    started, cpu = time.perf_counter(), time.process_time()
    for future in [pool.submit(writer, c, events) for c, events in work.items()]:
        future.result()
    return _rates(count * appends, started, cpu)


async def async_round(
    store: AsyncEventStore, count: int, appends: int, seed: int
) -> tuple[float, float]:
    work = _work(_conversations("async", count), appends, seed)
    await asyncio.gather(*(store.append(c, [events[0]]) for c, events in work.items()))

    async def writer(conversation: str, events: list[dict[str, Any]]) -> None:
        for event in events[1:]:
            await store.append(conversation, [event])

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(writer(c, events) for c, events in work.items()))
    return _rates(count * appends, started, cpu)


def measure(url: str, count: int, appends: int, rounds: int, pool_size: int) -> dict[str, Any]:
    pool_options = {"pool_size": pool_size, "max_overflow": 0, "pool_timeout": 120}
    blocking = EventStore(create_engine(url, **pool_options))
    blocking.create_schema()
    rates: dict[str, list[float]] = {"async": [], "threads": []}
    cpu: dict[str, list[float]] = {"async": [], "threads": []}
    with (
        ThreadPoolExecutor(max_workers=count) as pool,
        asyncio.Runner() as runner,  # one loop for every round: its connections live in it
    ):
        asynchronous = AsyncEventStore(create_async_engine(url, **pool_options))
        for number in range(rounds):
            sides = ["threads", "async"] if number % 2 == 0 else ["async", "threads"]
            for side in sides:
                seed = 1000 * number + (1 if side == "async" else 2)
                if side == "async":
                    rate, cpu_ms = runner.run(async_round(asynchronous, count, appends, seed))
                else:
                    rate, cpu_ms = threads_round(blocking, pool, count, appends, seed)
                rates[side].append(rate)
                cpu[side].append(cpu_ms)
                print(
                    f"  round {number + 1} {side:<8} {rate:8.0f} events/s"
                    f"  {cpu_ms:.2f} ms CPU per event",
                    flush=True,
                )
        report = runner.run(asynchronous.verify())
        runner.run(asynchronous.close())
        runner.run(asynchronous.engine.dispose())
    assert report.ok, report.problems
    blocking.engine.dispose()
    medians = {side: statistics.median(values) for side, values in rates.items()}
    cpu_ms = {side: statistics.median(values) for side, values in cpu.items()}
    ratio = medians["async"] / medians["threads"]
    return {
        "backend": blocking.engine.dialect.name,
        "conversations": count,
        "appends_per_conversation": appends,
        "rounds": rounds,
        "pool_size": pool_size,
        "events_per_s": {side: round(value, 1) for side, value in medians.items()},
        "rounds_events_per_s": {s: [round(v, 1) for v in values] for s, values in rates.items()},
        "ratio": round(ratio, 3),
        # CPU per event tells the cost apart from the machine's load: on a busy machine a
        # process of one thread gets one runnable thread's share of the CPUs, one of 50 threads
        # up to 50 shares, whatever each spends per event.
        "cpu_ms_per_event": {side: round(value, 3) for side, value in cpu_ms.items()},
        "target": "async (one loop) >= blocking store on a thread per conversation",
        "met": ratio >= 1.0,
    }


def report(result: dict[str, Any]) -> str:
    rates = result["events_per_s"]
    return (
        f"{result['backend']}: {result['conversations']} conversations, "
        f"{result['appends_per_conversation']} appends each: async {rates['async']:.0f} "
        f"events/s, {result['conversations']} threads {rates['threads']:.0f} events/s, "
        f"ratio {result['ratio']:.2f} (>= 1 {'met' if result['met'] else 'NOT met'}); "
        f"CPU per event: async {result['cpu_ms_per_event']['async']:.2f} ms, threads "
        f"{result['cpu_ms_per_event']['threads']:.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", required=True)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--appends", type=int, default=40, help="timed appends per conversation")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--pool", type=int, default=25, help="connections of each side's engine (default 25)"
    )
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.url, args.conversations, args.appends, args.rounds, args.pool)
    print(report(result))
    save(args.output, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
