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
from ._workers import crash_writer

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
