"""Following the change feed: the delay from commit to delivery, and what the wake-up costs an
append.

    .venv/bin/python -m benchmarks.bench_follow --url URL

A follower (``EventStore.follow``) runs in a thread while the main thread appends one event at
a time, with a random pause of ``--gap`` seconds (0.5x to 1.5x) between appends, so every
append finds the follower waiting. The delay of an event is the time from the return of its
``append`` (its commit is done) to the follower handing it on; an event handed on before
``append`` returned counts 0. Measured on each backend as the store follows it (PostgreSQL:
woken by the notification of migration 0021; SQLite: polling), and on PostgreSQL also with the
notification ignored (the polling SQLite gets: 50 ms after a read that found something,
doubling up to ``poll``, 1 s), the baseline the notification improves on. On PostgreSQL the
time until the notification itself arrives is measured too, on a listening connection of the
benchmark's own (``notified``): the rest of the delay is the feed waiting for older
transactions to end. Target (issue 24): median below 50 ms on PostgreSQL.

The feed shows a row once every older transaction *of the whole server* has ended
(``viewstore/store/feed/feed.py``): on a server where other clients keep transactions open, the
delay is theirs. Measure on a server of its own.

PostgreSQL also measures one append with the trigger (``events_feed_notify``) on and off, in
alternating blocks: the wake-up's price on the write path.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks.bench_store import fresh_events, median, save, timed
from viewstore import EventStore
from viewstore.store.feed.follow import ListenTarget, follow


class _Follower(threading.Thread):
    def __init__(self, store: EventStore, *, notified: bool, poll: float) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.notified = notified
        self.poll = poll
        self.arrived: dict[str, float] = {}
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        discover = self.store._follow_target if self.notified else (lambda: None)
        entries = follow(self.store.feed, discover, after=None, poll=self.poll, limit=1000)
        try:
            with closing(entries):
                for entry in entries:
                    self.arrived[entry.event_id] = time.monotonic()
                    if self.stop.is_set() and entry.conversation_id == "stop":
                        return
        except BaseException as error:  # reported by the measure
            self.error = error


class _Notices(threading.Thread):
    """Arrival times of the store's notifications on a listening connection of its own: how
    much of the delay is the notification's, and how much the feed's horizon."""

    def __init__(self, target: ListenTarget) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.times: list[float] = []
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        import psycopg  # noqa: PLC0415 - PostgreSQL only

        with psycopg.connect(**self.target.params, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self.target.channel))
            )
            self.ready.set()
            while not self.stop.is_set():
                for _ in conn.notifies(timeout=0.2):
                    self.times.append(time.monotonic())


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def delays(url: str, *, notified: bool, events: int, gap: float, seed: int) -> dict[str, Any]:
    """Commit-to-delivery delays of ``events`` single appends, in milliseconds."""
    rng = random.Random(seed)
    conversation = f"follow-{uuid.uuid4().hex[:8]}"
    with EventStore(url) as writer, EventStore(url) as reader:
        follower = _Follower(reader, notified=notified, poll=1.0)
        follower.start()
        writer.append("warm-up", fresh_events(1, seed))
        time.sleep(1.5)  # the follower has read everything and waits
        target = reader._follow_target() if notified else None
        notices = None if target is None else _Notices(target)
        if notices is not None:
            notices.start()
            notices.ready.wait(30)
        returned: dict[str, float] = {}
        for event in fresh_events(events, seed + 1):
            time.sleep(gap * rng.uniform(0.5, 1.5))
            writer.append(conversation, [event])
            returned[event["id"]] = time.monotonic()
        follower.stop.set()
        writer.append("stop", fresh_events(1, seed + 2))
        follower.join(30)
        if notices is not None:
            notices.stop.set()
            notices.join(30)
        if follower.error is not None:
            raise follower.error
    late = [
        max(0.0, follower.arrived[eid] - at) * 1e3
        for eid, at in returned.items()
        if eid in follower.arrived
    ]
    out: dict[str, Any] = {
        "events": events,
        "delivered": len(late),
        "median_ms": round(statistics.median(late), 2),
        "p95_ms": round(_percentile(late, 0.95), 2),
        "max_ms": round(max(late), 2),
    }
    if notices is not None and len(notices.times) >= events:
        # one writer, one transaction per append: the k-th notification is the k-th append's
        heard = [
            max(0.0, t - at) * 1e3
            for t, at in zip(notices.times[:events], returned.values(), strict=True)
        ]
        out["notified_median_ms"] = round(statistics.median(heard), 2)
        out["notified_p95_ms"] = round(_percentile(heard, 0.95), 2)
    return out


def trigger_cost(url: str, blocks: int, block: int, seed: int) -> dict[str, Any]:
    """One append's cost with the notify trigger on and off (alternating blocks)."""
    costs: dict[str, list[float]] = {"on": [], "off": []}
    with EventStore(url) as store:
        keys = {side: f"cost-{side}-{uuid.uuid4().hex[:6]}" for side in costs}
        for key in keys.values():
            store.append(key, fresh_events(2, seed))  # the fast path from here on
        for number in range(blocks):
            for side in ("on", "off") if number % 2 == 0 else ("off", "on"):
                switch = "ENABLE" if side == "on" else "DISABLE"
                with store.engine.begin() as conn:
                    conn.execute(text(f"ALTER TABLE events {switch} TRIGGER events_feed_notify"))
                batch = fresh_events(block, seed + 10 * number + (side == "on"))

                def appends(key: str = keys[side], batch: list[Any] = batch) -> None:
                    for event in batch:
                        store.append(key, [event])

                costs[side].append(timed(appends) / block)
        with store.engine.begin() as conn:
            conn.execute(text("ALTER TABLE events ENABLE TRIGGER events_feed_notify"))
    on, off = median(costs["on"]), median(costs["off"])
    return {
        "append_ms_trigger_on": round(on * 1e3, 3),
        "append_ms_trigger_off": round(off * 1e3, 3),
        "on_vs_off_cost": round(on / off, 3),
    }


def measure(url: str, events: int, gap: float, blocks: int, block: int) -> dict[str, Any]:
    with EventStore(url) as store:
        store.create_schema()
        backend = store.engine.dialect.name
    out: dict[str, Any] = {"backend": backend, "gap_s": gap}
    out["follow"] = delays(url, notified=True, events=events, gap=gap, seed=1)
    if backend == "postgresql":
        out["polling_baseline"] = delays(url, notified=False, events=events, gap=gap, seed=2)
        out["median_vs_polling"] = round(
            out["polling_baseline"]["median_ms"] / max(out["follow"]["median_ms"], 0.01), 2
        )
        out["target"] = "follow median < 50 ms"
        out["append"] = trigger_cost(url, blocks, block, seed=3)
    return out


def _show(result: dict[str, Any]) -> None:
    for name in ("follow", "polling_baseline"):
        if name in result:
            r = result[name]
            print(
                f"{result['backend']:>10} {name:<17} median {r['median_ms']:7.2f} ms  "
                f"p95 {r['p95_ms']:7.2f} ms  max {r['max_ms']:7.2f} ms  "
                f"({r['delivered']}/{r['events']})"
            )
            if "notified_median_ms" in r:
                print(
                    f"{'':>10} {'(notified)':<17} median {r['notified_median_ms']:7.2f} ms  "
                    f"p95 {r['notified_p95_ms']:7.2f} ms"
                )
    if "append" in result:
        a = result["append"]
        print(
            f"{'':>10} append with the notify trigger {a['append_ms_trigger_on']:.3f} ms, "
            f"without {a['append_ms_trigger_off']:.3f} ms (x{a['on_vs_off_cost']})"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between appends")
    parser.add_argument("--blocks", type=int, default=8, help="trigger on/off blocks")
    parser.add_argument("--block", type=int, default=100, help="appends per block")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    result = measure(args.url, args.events, args.gap, args.blocks, args.block)
    _show(result)
    if args.output is not None:
        save(args.output, result)
    return result


if __name__ == "__main__":
    main()
