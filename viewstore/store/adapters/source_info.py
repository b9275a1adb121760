"""What an agent server says about a conversation (``conversation_sources``, migration 0020):
the rows ``viewstore ingest`` and ``viewstore sync`` write, and ``EventStore``'s methods for
them. A newer record replaces an older one (by the server's ``updated_at``); an older one,
arriving late, changes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from viewstore.errors import InvalidArgumentError
from viewstore.store.database.schema import conversation_sources
from viewstore.store.inputs import conversation_key, new_conversation_key
from viewstore.store.read.reads import aware, comparable
from viewstore.store.store_core import ConversationId, StoreCore

_TEXT_LIMITS = {"source": 255, "execution_status": 64, "agent_kind": 255}


@dataclass(frozen=True)
class SourceInfo:
    """One conversation as its agent server describes it."""

    conversation_id: str
    source: str  # the agent server's name in the ingest's sources file
    title: str | None = None
    execution_status: str | None = None  # idle, running, paused, finished, error, stuck, ...
    agent_kind: str | None = None
    llm_model: str | None = None
    created_at: datetime | None = None  # the agent server's times
    updated_at: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    recorded_at: datetime | None = None  # when the store last wrote the row


def _check(info: SourceInfo) -> SourceInfo:
    for name, limit in _TEXT_LIMITS.items():
        value = getattr(info, name)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise InvalidArgumentError(f"{name} must be a string of at most {limit} characters")
    for name in ("created_at", "updated_at"):
        value = getattr(info, name)
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise InvalidArgumentError(f"{name} must be a datetime with a time zone")
    return info


def save(conn: Connection, key: str, info: SourceInfo, now: datetime) -> None:
    values: dict[str, Any] = {
        "conversation_id": key,
        "source": info.source,
        "title": info.title,
        "execution_status": info.execution_status,
        "agent_kind": info.agent_kind,
        "llm_model": info.llm_model,
        "created_at": None if info.created_at is None else comparable(conn, info.created_at),
        "updated_at": None if info.updated_at is None else comparable(conn, info.updated_at),
        "tags": json.dumps(info.tags, ensure_ascii=False, sort_keys=True) if info.tags else None,
        "recorded_at": comparable(conn, now),
    }
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(conversation_sources).values(values)
    table = conversation_sources.c
    newer = or_(table.updated_at.is_(None), statement.excluded.updated_at >= table.updated_at)
    changed = {
        name: getattr(statement.excluded, name) for name in values if name != "conversation_id"
    }
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[table.conversation_id], set_=changed, where=newer
        )
    )


def load(conn: Connection, key: str) -> SourceInfo | None:
    row = conn.execute(
        select(conversation_sources).where(conversation_sources.c.conversation_id == key)
    ).first()
    if row is None:
        return None
    return SourceInfo(
        conversation_id=row.conversation_id,
        source=row.source,
        title=row.title,
        execution_status=row.execution_status,
        agent_kind=row.agent_kind,
        llm_model=row.llm_model,
        created_at=None if row.created_at is None else aware(row.created_at),
        updated_at=None if row.updated_at is None else aware(row.updated_at),
        tags=json.loads(row.tags) if row.tags else {},
        recorded_at=aware(row.recorded_at),
    )


class SourceInfoMethods(StoreCore):
    def save_conversation_info(self, info: SourceInfo) -> None:
        """Keep what an agent server says about a conversation (one transaction). A record
        whose ``updated_at`` is older than the stored one's changes nothing."""
        key = new_conversation_key(info.conversation_id)
        _check(info)
        with self._write() as conn:
            save(conn, key, info, datetime.now(UTC))

    def conversation_info(self, conversation_id: ConversationId) -> SourceInfo | None:
        """What the conversation's agent server last said about it, or None."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return load(conn, key)
