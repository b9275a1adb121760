"""Killing a migration half way: the one procedure the online migrations' tests share."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError, ProgrammingError

from viewstore import EventStore
from viewstore.domain.view import View
from viewstore.store import StoredView

from ..store._helpers import layout_url

REPO = Path(__file__).resolve().parents[2]
_MIGRATE = "from viewstore import EventStore; EventStore({url!r}).create_schema()"


def kill_half_way(
    store: EventStore,
    url: str,
    done: str,
    at_least: int,
    meanwhile: Callable[[], object],
) -> None:
    """Migrate ``url`` in another process, one row or condensation per transaction, and kill it
    with SIGKILL once the query ``done`` counts ``at_least``; ``meanwhile`` (an append through
    ``store``) is sent just before the kill and must finish."""
    env = {**os.environ, "VIEWSTORE_MIGRATION_BATCH": "1", "PYTHONPATH": str(REPO)}
    cwd = Path(url.removeprefix("sqlite:///")).parent
    process = subprocess.Popen([sys.executable, "-c", _MIGRATE.format(url=url)], env=env, cwd=cwd)
    thread = threading.Thread(target=meanwhile, daemon=True)
    try:
        found = 0
        deadline = time.monotonic() + 120
        while found < at_least and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
            # The query may name what the migration has not made yet.
            with store.engine.connect() as conn, suppress(OperationalError):
                found = conn.execute(text(done)).scalar_one()
        assert process.poll() is None, "the migration ended before it could be killed"
        # Appends go on while it runs. This one is sent now and the migration killed without
        # waiting for it: under load, SQLite's busy handler can keep a writer waiting through
        # many batches, and a kill after it could find the migration done.
        thread.start()
        time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    thread.join(timeout=60)
    assert not thread.is_alive()


def stamped(store: EventStore) -> str:
    with store.engine.connect() as conn:
        return str(
            conn.execute(text("SELECT version_num FROM viewstore_alembic_version")).scalar_one()
        )


def migrated_and_fresh(request: pytest.FixtureRequest, layout: str) -> tuple[str, int | None, str]:
    """An empty database of ``layout`` for the store to migrate, its partitions argument, and
    a second empty one of the same backend for the store built fresh beside it."""
    url, partitions = layout_url(request, layout)
    if layout == "sqlite":
        return url, partitions, f"sqlite:///{request.getfixturevalue('tmp_path')}/fresh.db"
    return url, partitions, str(request.getfixturevalue("second_pg_url"))


@dataclass
class Race:
    """What ``killed_and_racing`` saw: each worker's calls and failures (by type and first
    line), the forks they made, and the second migration's exit code and error output."""

    calls: list[int] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    forks: list[str] = field(default_factory=list)
    migrated: int | None = None
    migration_errors: str = ""


def killed_and_racing(
    store: EventStore,
    url: str,
    cwd: Path,
    done: str,
    *,
    at_least: int = 100,
    workers: int = 3,
) -> Race:
    """The procedure every online revision must pass. ``store`` (``url``) is at the revision
    before it (built, then taken down). It is migrated in another process, one row or
    condensation per transaction; once the query ``done`` counts ``at_least`` (the revision's
    DDL committed, its batches running), ``workers`` agent worker processes start appending,
    condensing and forking (``_migration_workers``), and once each has appended, the migration
    is killed with SIGKILL. The workers go on while the store is half migrated, and while the
    migration is run again (in a process of its own, as ``viewstore init`` would) and after;
    then they stop."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    go, stop = cwd / "go-workers", cwd / "stop-workers"
    race = Race()
    # Started first, they wait for the go: a process takes seconds to start on a loaded
    # machine, and the batches would be done by then.
    started: list[tuple[subprocess.Popen[bytes], Path]] = []
    for n in range(workers):
        out = cwd / f"worker-{n}.json"
        command = [sys.executable, "-m", "tests.migrations._migration_workers"]
        command += [url, f"w{n}", str(go), str(stop), str(out)]
        started.append((subprocess.Popen(command, env=env, cwd=REPO), out))
    first = subprocess.Popen(
        [sys.executable, "-c", _MIGRATE.format(url=url)],
        env={**env, "VIEWSTORE_MIGRATION_BATCH": "1"},
        cwd=cwd,
    )
    try:
        _wait_for(store, done, at_least, first)
        go.touch()
        _each_appended(store, workers, first)  # while the batches run
        assert first.poll() is None, "the migration ended before it could be killed"
        first.send_signal(signal.SIGKILL)
        first.wait()
        _each_appended(store, workers)  # on the store half migrated
        again = subprocess.run(
            [sys.executable, "-c", _MIGRATE.format(url=url)],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        race.migrated, race.migration_errors = again.returncode, again.stderr
        _each_appended(store, workers)  # on the store migrated
    finally:
        stop.touch()
        if first.poll() is None:
            first.kill()
        first.wait()
        for process, _ in started:
            process.wait(timeout=120)
    for _, out in started:
        seen = json.loads(out.read_text(encoding="utf-8"))
        race.calls.append(seen["calls"])
        race.forks += seen["forks"]
        for what, count in seen["failures"].items():
            race.failures[what] = race.failures.get(what, 0) + count
    return race


_APPENDED = "SELECT count(*) FROM events WHERE event_id LIKE :worker"


def _each_appended(
    store: EventStore, workers: int, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Until every worker has appended since now (for at most 30 s, or while ``process``
    runs): a worker whose every call fails never has, and the race reports its failures."""

    def appended() -> list[int]:
        return [count(store, _APPENDED, worker=f"w{n}-%") for n in range(workers)]

    before = appended()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (process is None or process.poll() is None):
        if all(now > then for now, then in zip(appended(), before, strict=True)):
            return
        time.sleep(0.02)


def _wait_for(
    store: EventStore, done: str, at_least: int, process: subprocess.Popen[bytes]
) -> None:
    found = 0
    deadline = time.monotonic() + 120
    while found < at_least and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
        # The query may name what the migration has not made yet.
        with store.engine.connect() as conn, suppress(OperationalError, ProgrammingError):
            found = conn.execute(text(done)).scalar_one()
    assert found >= at_least, f"the migration did not get to {at_least} ({found})"


def assert_reads_replay(store: EventStore) -> None:
    """Every conversation's view, now and as of a few seqs (a fork's around its fork seq),
    equals a replay of its log by the pure engine: ``store.replay`` for the view now, and one
    pass of ``View`` over the log for the seqs (``store.replay(as_of=...)`` would replay the
    log from its start for each of them)."""
    for key in store.conversation_ids():
        view = store.view(key)
        assert view == store.replay(key), key
        assert None not in view.event_ids, key
        origin = store.fork_origin(key)
        around = {1, view.version // 2, view.version - 1}
        if origin is not None:
            around |= {origin.at_seq - 1, origin.at_seq, origin.at_seq + 1}
        wanted = {s for s in around if 0 < s <= view.version}
        replay = View()
        for stored in store.events(key, limit=max(wanted, default=0)):
            replay.append_event(stored.payload_json)
            if stored.seq in wanted:
                assert store.view(key, as_of=stored.seq) == StoredView(
                    conversation_id=key,
                    version=stored.seq,
                    events=list(replay.events),
                    manipulation_indices=sorted(replay.manipulation_indices),
                    unhandled_condensation_request=replay.unhandled_condensation_request,
                    as_of=stored.seq,
                ), (key, stored.seq)


def migrate_in_background(url: str, cwd: Path, batch: int = 1) -> subprocess.Popen[bytes]:
    """``viewstore init`` of ``url`` in another process, ``batch`` rows per transaction of an
    online revision's batches; the caller waits for it."""
    env = {**os.environ, "VIEWSTORE_MIGRATION_BATCH": str(batch), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", _MIGRATE.format(url=url)], env=env, cwd=cwd)


def count(store: EventStore, sql: str, **params: object) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


def wait_until(store: EventStore, sql: str, process: subprocess.Popen[bytes]) -> None:
    """Until the query ``sql`` counts some rows, while ``process`` runs."""
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        with suppress(OperationalError, ProgrammingError):
            if count(store, sql):
                return
        time.sleep(0.005)
    raise AssertionError(f"never counted any ({sql}); the migration exited {process.poll()}")


def forgotten_rows(store: EventStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT conversation_id, seq, event_id, was_in_view FROM condensation_forgotten "
                "ORDER BY conversation_id, seq, event_id"
            )
        )
        return [(c, int(s), e, bool(w)) for c, s, e, w in found]
