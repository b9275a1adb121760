"""A writer process killed with SIGKILL inside an append leaves nothing behind."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from viewstore import AppendResult, EventStore

from ._helpers import dump, message
from ._workers import crash_writer, fast_writer

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

POINTS = ["after_events", "after_view_rows", "before_commit"]
READY_DEADLINE = 30.0
RELEASE_DEADLINE = 30.0  # PostgreSQL: the server rolls the dead session back


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_inside_an_append_leaves_nothing(db_url: str, point: str, tmp_path: Path) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message("m1"), message("m2"), message("m3")])
        store.append("other", message("o1"))
        engine = create_engine(db_url)
        before = dump(engine)

        ready = tmp_path / "ready"
        ctx = multiprocessing.get_context("spawn")
        child = ctx.Process(target=crash_writer, args=(db_url, "c", point, str(ready), 3))
        child.start()
        deadline = time.monotonic() + READY_DEADLINE
        while not ready.exists():
            assert child.is_alive(), f"writer exited with {child.exitcode} before {point}"
            assert time.monotonic() < deadline, f"writer never reached {point}"
            time.sleep(0.01)
        assert ready.read_text() == point
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        assert child.exitcode == -signal.SIGKILL

        # the killed append is fully absent: every table exactly as before
        assert dump(engine) == before

        # the next append goes through once the dead transaction is gone (PostgreSQL: its
        # row lock is held until the server notices; bounded wait in a thread)
        outcome: dict[str, AppendResult | BaseException] = {}

        def next_append() -> None:
            try:
                outcome["result"] = store.append("c", message("m4"), expected_version=3)
            except BaseException as error:
                outcome["result"] = error

        thread = threading.Thread(target=next_append)
        thread.start()
        thread.join(RELEASE_DEADLINE)
        assert not thread.is_alive(), "the dead writer's lock was never released"
        result = outcome["result"]
        assert isinstance(result, AppendResult), result
        assert result.version == 4
        assert result.appended == ["m4"]

        assert [e.event_id for e in store.events("c")] == ["m1", "m2", "m3", "m4"]
        assert store.view("c").event_ids == ["m1", "m2", "m3", "m4"]
        report = store.verify()
        assert report.ok, report.render()
        # and the killed batch can still be appended whole afterwards
        store.append("c", [message("killed-1"), message("killed-3")], expected_version=4)
        assert store.verify("c").ok
        engine.dispose()


@pytest.mark.parametrize("delay", [0.15, 0.4, 0.75])
def test_sigkill_at_a_random_moment_of_fast_appends(
    db_url: str, delay: float, tmp_path: Path
) -> None:
    """The fast path has no crash points to stop at (on PostgreSQL it is one statement), so
    kill a process appending as fast as it can at some moment: every event that made it in is
    whole (its view and index rows verify), seqs have no gap, and appending goes on."""
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message("m1")])
        ready = tmp_path / "ready"
        ctx = multiprocessing.get_context("spawn")
        child = ctx.Process(target=fast_writer, args=(db_url, "c", str(ready)))
        child.start()
        deadline = time.monotonic() + READY_DEADLINE
        while not ready.exists():
            assert child.is_alive(), f"writer exited with {child.exitcode}"
            assert time.monotonic() < deadline, "writer never appended"
            time.sleep(0.005)
        time.sleep(delay)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        acknowledged = int(ready.read_text())

        # the dead writer's append either committed or left nothing (PostgreSQL may still be
        # finishing it: wait until the version stops moving)
        version = store.version("c")
        while True:
            time.sleep(0.2)
            if store.version("c") == version:
                break
            version = store.version("c")
        assert version >= acknowledged >= 2
        ids = [e.event_id for e in store.events("c")]
        assert ids == ["m1"] + [f"fast-{seq}" for seq in range(2, version + 1)]
        assert store.view("c").event_ids == ids
        report = store.verify()
        assert report.ok, report.render()
        assert store.append("c", message("after"), expected_version=version).version == version + 1
        assert store.verify("c").ok
