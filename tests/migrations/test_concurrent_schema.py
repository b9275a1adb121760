"""``create_schema()`` is safe to run every time, also by many processes at once on a fresh
database: the migration runs under a lock (PostgreSQL: an advisory lock; SQLite: the write
lock, taken with BEGIN IMMEDIATE, which waits out the busy timeout), so one process migrates
and the others find the schema at head (viewstore/store/event_store.py)."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from viewstore import EventStore
from viewstore.store.database.revisions import MIGRATION_LOCK_KEY
from viewstore.store.event_store import alembic_config

from ..store._helpers import M, S
from ._schema_workers import create_schema_worker

PROCESSES = 8
REPO = Path(__file__).resolve().parents[2]


def test_eight_processes_create_the_schema_at_once(db_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    workers = [
        context.Process(target=create_schema_worker, args=(db_url, barrier, results))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert outcomes == [("ok", head)] * PROCESSES
    with EventStore(db_url) as store:
        assert store.schema_revision() == head
        store.create_schema()  # and once more: nothing to do
        assert store.append("c", [S(), M("m")]).version == 2
        assert store.verify().ok


_ENTRIES = {
    "create_schema": [
        sys.executable,
        "-c",
        "import os; from viewstore import EventStore; "
        "EventStore(os.environ['VIEWSTORE_URL']).create_schema()",
    ],
    "alembic": [sys.executable, "-m", "alembic", "upgrade", "head"],
}


@contextmanager
def _migration_lock_held(url: str) -> Iterator[Callable[[], bool]]:
    """Hold the lock a migration takes; yields a probe: is someone waiting for it (PostgreSQL
    can tell; on SQLite the probe says False and the test relies on the process still running)."""
    if url.startswith("sqlite"):
        holder = sqlite3.connect(make_url(url).database or "", isolation_level=None)
        try:
            holder.execute("PRAGMA journal_mode = WAL")
            holder.execute("BEGIN IMMEDIATE")
            yield lambda: False
        finally:
            holder.close()
        return
    engine = create_engine(url)
    try:
        with engine.connect() as holder, engine.connect() as probe:
            holder.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            holder.commit()

            def waiting() -> bool:
                found = probe.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND wait_event = 'advisory'"
                    )
                ).scalar_one()
                probe.rollback()
                return bool(found)

            try:
                yield waiting
            finally:
                holder.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
                holder.commit()
    finally:
        engine.dispose()


@pytest.mark.parametrize("entry", list(_ENTRIES))
def test_a_migration_waits_for_the_migration_lock(db_url: str, entry: str) -> None:
    """Both ways in (a store's create_schema() and the alembic command line) take the lock,
    and wait for it rather than fail."""
    env = {**os.environ, "VIEWSTORE_URL": db_url}
    with _migration_lock_held(db_url) as waiting:
        migrating = subprocess.Popen(
            _ENTRIES[entry], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            deadline = time.monotonic() + 60
            if db_url.startswith("postgresql"):
                while not waiting():
                    assert migrating.poll() is None, migrating.communicate()
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            else:
                time.sleep(3)  # enough to start up and reach the lock
            assert migrating.poll() is None, migrating.communicate()
        except BaseException:
            migrating.kill()
            raise
    _, stderr = migrating.communicate(timeout=120)
    assert migrating.returncode == 0, stderr.decode()
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    with EventStore(db_url) as store:
        assert store.schema_revision() == head
        assert store.append("c", [S()]).version == 1
