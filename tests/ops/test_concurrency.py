"""Many worker processes on one store: conditional appends with retries, and (PostgreSQL) no
lock wider than the conversation."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections import Counter, defaultdict

import pytest
from sqlalchemy import create_engine, text

from viewstore import EventStore

from ._helpers import backend, message
from ._workers import concurrency_worker

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

WORKERS = 4
STEPS = 500  # appends per worker: 2,000 per backend, 4,000 in all
SHARED = ["shared-0", "shared-1"]


def test_concurrent_workers_store_every_event_exactly_once(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
    ctx = multiprocessing.get_context("spawn")
    started = time.monotonic()
    with ctx.Pool(WORKERS) as pool:
        results = pool.starmap(
            concurrency_worker, [(db_url, w, STEPS, SHARED) for w in range(WORKERS)]
        )
    elapsed = time.monotonic() - started

    errors = [error for result in results for error in result["errors"]]
    assert errors == [], errors[:5]
    conflicts = sum(result["conflicts"] for result in results)
    done = [pair for result in results for pair in result["done"]]
    assert len(done) == WORKERS * STEPS

    with EventStore(db_url) as store:
        assert sorted(store.conversation_ids()) == sorted(
            SHARED + [f"own-{w}" for w in range(WORKERS)]
        )
        messages: Counter[str] = Counter()
        where: dict[str, str] = {}
        total = 0
        for conv in store.conversation_ids():
            log = store.events(conv)
            total += len(log)
            # seqs 1..N without gaps, and the version says N
            assert [e.seq for e in log] == list(range(1, len(log) + 1)), conv
            assert store.version(conv) == len(log)
            for event in log:
                payload = json.loads(event.payload_json)
                # the decision was made on exactly the version it was stored after
                assert payload["at"] == event.seq, (conv, event.event_id)
                if event.kind == "MessageEvent":
                    messages[event.event_id] += 1
                    where[event.event_id] = conv
            # stored view rows == a pure replay
            assert store.view(conv).event_ids == store.replay(conv).event_ids
        # every decided message stored exactly once, in the conversation it was meant for
        assert set(messages.values()) == {1}
        assert sorted((where[eid], eid) for eid in messages) == sorted(done)
        report = store.verify()
        assert report.ok, report.render()
        assert len(report.conversations) == len(SHARED) + WORKERS
    with capsys.disabled():
        print(
            f"\n[ops] concurrency {backend(db_url)}: {WORKERS} processes, "
            f"{len(done)} appends ({total} events), {conflicts} conflicts retried, "
            f"{elapsed:.1f}s"
        )


@pytest.mark.postgres
def test_writers_to_distinct_conversations_do_not_wait(fresh_pg_url: str) -> None:
    """A transaction holding conversation X's row lock blocks appends to X only."""
    with EventStore(fresh_pg_url) as store:
        store.create_schema()
        store.append("X", message("x1"))
        store.append("Y", message("y1"))
        holder = create_engine(fresh_pg_url)
        try:
            with holder.connect() as conn:
                conn.execute(text("SELECT id FROM conversations WHERE id = 'X' FOR UPDATE"))
                timings: dict[str, float] = {}

                def append(conv: str, eid: str) -> None:
                    start = time.monotonic()
                    store.append(conv, message(eid))
                    timings[conv] = time.monotonic() - start

                to_y = threading.Thread(target=append, args=("Y", "y2"))
                to_x = threading.Thread(target=append, args=("X", "x2"))
                to_x.start()
                to_y.start()
                to_y.join(timeout=5)
                assert not to_y.is_alive(), "an append to Y waited on a lock held on X"
                assert timings["Y"] < 2.0
                time.sleep(0.5)
                assert to_x.is_alive(), "an append to X did not wait for X's row lock"
                assert "X" not in timings
                conn.rollback()  # transaction A ends
                to_x.join(timeout=10)
                assert not to_x.is_alive()
        finally:
            holder.dispose()
        assert store.version("X") == 2
        assert store.version("Y") == 2
        assert store.verify().ok


def test_concurrent_first_appends_conflict(db_url: str) -> None:
    """Two appends that both expect a new conversation (version 0): one wins, the other gets
    ConcurrencyError (a bug fixed here: the loser used to be appended at seq 2)."""
    from viewstore import ConcurrencyError  # noqa: PLC0415
    from viewstore.store import event_store  # noqa: PLC0415

    gate = threading.Event()
    slow = threading.local()

    def hook(point: str) -> None:
        if point == "before_commit" and getattr(slow, "on", False):
            gate.set()
            time.sleep(0.5)

    outcome: dict[str, object] = defaultdict(list)
    with EventStore(db_url) as store:
        store.create_schema()

        def first() -> None:
            slow.on = True
            outcome["first"] = store.append("new", message("a"), expected_version=0).version

        event_store.append_hook = hook
        try:
            thread = threading.Thread(target=first)
            thread.start()
            assert gate.wait(10)
            with pytest.raises(ConcurrencyError) as caught:
                store.append("new", message("b"), expected_version=0)
            thread.join(10)
        finally:
            event_store.append_hook = None
        assert outcome["first"] == 1
        assert caught.value.actual == 1
        assert [e.event_id for e in store.events("new")] == ["a"]
