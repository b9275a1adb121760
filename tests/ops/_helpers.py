"""Event builders and table dumps shared by the operations tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, create_engine, select, text
from sqlalchemy.engine import Engine

from viewstore.store.database.schema import metadata


def settled_feed(store: Any, count: int, **kwargs: Any) -> list[Any]:
    """``store.feed(**kwargs)`` once it shows ``count`` entries. On PostgreSQL the feed shows
    only what is below every transaction open on the server, in any database (the snapshot's
    ``xmin``): another test's transaction holds it back for a moment, so a read right after an
    append may see a prefix. Waits up to 30 s, then fails with what it saw."""
    deadline = time.monotonic() + 30
    while len(entries := store.feed(**kwargs)) < count:
        assert time.monotonic() < deadline, entries
        time.sleep(0.05)
    return list(entries)


def message(eid: str, text_: str = "hello", **extra: Any) -> dict[str, Any]:
    """A user MessageEvent; ``extra`` top-level fields are kept in the payload."""
    return {
        "id": eid,
        "source": "user",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": text_}]},
        "kind": "MessageEvent",
        **extra,
    }


def action(eid: str, tool_call_id: Any = "tc1", **extra: Any) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "agent",
        "thought": [],
        "thinking_blocks": [],
        "action": {"command": "ls", "kind": "TerminalAction"},
        "tool_name": "terminal",
        "tool_call_id": tool_call_id,
        "llm_response_id": "r1",
        "kind": "ActionEvent",
        **extra,
    }


def condensation(
    eid: str, forgotten: Any = (), summary: Any = None, offset: Any = None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "environment",
        "forgotten_event_ids": list(forgotten) if isinstance(forgotten, tuple) else forgotten,
        "summary": summary,
        "summary_offset": offset,
        "kind": "Condensation",
        **extra,
    }


def observation(eid: str, tool_call_id: str = "tc1", action_id: str = "a1") -> dict[str, Any]:
    return {
        "id": eid,
        "source": "environment",
        "tool_name": "terminal",
        "tool_call_id": tool_call_id,
        "action_id": action_id,
        "observation": {"content": [{"type": "text", "text": "ok"}], "kind": "TerminalObservation"},
        "kind": "ObservationEvent",
    }


def condensed_history() -> list[dict[str, Any]]:
    """Seven events, one of each part of the view's machinery::

    seq  1 m1   2 a1 (tc1)   3 o1 (tc1)   4 m2   5 request   6 k1   7 m3
    k1 forgets a1 and o1 and inserts its summary at position 1: view m1, k1-summary, m2, m3
    """
    return [
        message("m1", "text 1"),
        action("a1"),
        observation("o1"),
        message("m2", "text 2"),
        {"id": "r1", "source": "environment", "kind": "CondensationRequest"},
        condensation("k1", ("a1", "o1"), summary="ran ls: ok", offset=1),
        message("m3", "text 3"),
    ]


def is_postgres(url: str) -> bool:
    return url.startswith("postgres")


def backend(url: str) -> str:
    return "postgresql" if is_postgres(url) else "sqlite"


def dump(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every viewstore table (and the Alembic revision), in a stable order."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            rows = conn.execute(select(table)).all()
            out[table.name] = sorted((tuple(row) for row in rows), key=repr)
        out["viewstore_alembic_version"] = [
            tuple(r) for r in conn.execute(text("SELECT * FROM viewstore_alembic_version"))
        ]
    return out


def raw_engine(url: str) -> Engine:
    return create_engine(url)


APPEND_ONLY_MESSAGE = "viewstore: the events table is append-only"  # migration 0001
SQLITE_TRIGGERS = ["events_append_only_update", "events_append_only_delete"]
SET_ONCE_TRIGGER = "conversations_set_once"  # migration 0015


@contextmanager
def guard_off(conn: Connection) -> Iterator[None]:
    """Switch the guards off the way the database owner can, and back on: the log's
    append-only guard and (migration 0015) the conversation row's set-once guard.
    PostgreSQL: ``ALTER TABLE ... DISABLE TRIGGER``; SQLite: ``DROP TRIGGER``, the triggers
    recreated afterwards from their stored SQL."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
        conn.execute(text("ALTER TABLE conversations DISABLE TRIGGER conversations_set_once"))
        yield
        conn.execute(text("ALTER TABLE conversations ENABLE TRIGGER conversations_set_once"))
        conn.execute(text("ALTER TABLE events ENABLE TRIGGER USER"))
        return
    stored = conn.execute(
        text(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            "AND ((tbl_name = 'events' AND name NOT LIKE 'events_search_%') "
            "OR name = 'conversations_set_once')"
        )
    ).all()
    assert sorted(name for name, _ in stored) == sorted([*SQLITE_TRIGGERS, SET_ONCE_TRIGGER])
    for name, sql in stored:
        assert APPEND_ONLY_MESSAGE in sql or name == SET_ONCE_TRIGGER
        conn.execute(text(f"DROP TRIGGER {name}"))
    yield
    for _, sql in stored:
        conn.execute(text(sql))


def age(store: Any, names: list[str], days: int) -> None:
    """Make conversations look last appended to ``days`` ago (the conversation row is not
    append-only; only the log is). ``verify`` names such a row: its time is before its last
    event's."""
    then: Any = datetime.now(UTC) - timedelta(days=days)
    if store.engine.dialect.name == "sqlite":  # the text form the store writes there
        then = f"{then:%Y-%m-%d %H:%M:%S.%f}"
    with store.engine.begin() as conn:
        for name in names:
            conn.execute(
                text("UPDATE conversations SET updated_at = :t WHERE id = :c"),
                {"t": then, "c": name},
            )
