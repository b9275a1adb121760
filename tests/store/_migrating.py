"""Killing a migration half way: the one procedure the online migrations' tests share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from viewstore import EventStore

from ._helpers import layout_url

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
