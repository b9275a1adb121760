"""Run in spawned processes by test_concurrent_schema.py: each builds its own store, waits for
the others at a barrier, then creates the schema at the same moment as all of them."""

from __future__ import annotations

from typing import Any

from viewstore import EventStore


def create_schema_worker(url: str, barrier: Any, results: Any) -> None:
    try:
        with EventStore(url) as store:
            barrier.wait(timeout=60)
            store.create_schema()
            results.put(("ok", store.schema_revision()))
    except BaseException as error:  # reported to the test, which names it
        results.put(("error", f"{type(error).__name__}: {error}"))
