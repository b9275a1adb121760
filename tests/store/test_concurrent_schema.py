"""``create_schema()`` is safe to run every time, also by many processes at once on a fresh
database: the migration runs under a lock (PostgreSQL: an advisory lock; SQLite: the write
lock, taken with BEGIN IMMEDIATE, which waits out the busy timeout), so one process migrates
and the others find the schema at head (viewstore/store/event_store.py)."""

from __future__ import annotations

import multiprocessing

from alembic.script import ScriptDirectory

from viewstore import EventStore
from viewstore.store.event_store import alembic_config

from ._helpers import M, S
from ._schema_workers import create_schema_worker

PROCESSES = 8


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
