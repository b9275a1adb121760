"""Event builders and table dumps shared by the operations tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import Engine

from viewstore.store.schema import metadata


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
