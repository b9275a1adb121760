"""Slow statements, logged as warnings under ``viewstore.sql``.

Every statement SQLAlchemy runs for a store's engine is timed (two clock reads; nothing is
logged below the threshold). The append fast path talks to the driver directly and is timed
where it runs (``EventStore._write_plan``). The threshold is ``VIEWSTORE_SLOW_MS``
milliseconds (default 1000), read when the engine is created.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from sqlalchemy import Engine, event

log = logging.getLogger("viewstore.sql")
DEFAULT_SLOW_MS = 1000.0
_STARTED = "viewstore_started"


def threshold() -> float:
    """Seconds from which a statement counts as slow."""
    try:
        return float(os.environ.get("VIEWSTORE_SLOW_MS", DEFAULT_SLOW_MS)) / 1000
    except ValueError:
        return DEFAULT_SLOW_MS / 1000


def report(seconds: float, limit: float, statement: str) -> None:
    if seconds >= limit:
        text = " ".join(statement.split())
        log.warning("slow statement (%.0f ms): %s", seconds * 1000, text[:300])


def watch(engine: Engine) -> None:
    limit = threshold()

    @event.listens_for(engine, "before_cursor_execute")
    def _before(conn: Any, _cursor: Any, _sql: str, _params: Any, _ctx: Any, _many: bool) -> None:
        conn.info[_STARTED] = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn: Any, _cursor: Any, sql: str, _params: Any, _ctx: Any, _many: bool) -> None:
        started = conn.info.pop(_STARTED, None)
        if started is not None:
            report(time.perf_counter() - started, limit, sql)
