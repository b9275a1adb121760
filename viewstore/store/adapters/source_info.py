"""What an agent server says about a conversation (``conversation_sources``): the rows
``viewstore ingest`` and ``viewstore sync`` write, as SQL (``EventStore``'s methods for them
are viewstore/store/sources_api.py's). A newer record replaces an older one (by the server's
``updated_at``); an older one, arriving late, changes nothing.

The row's ``source`` is also the conversation's owner (docs/fleet.md, "Ownership"): the first
source to claim a conversation that holds no events owns it, and from then on only that source
may describe it or add to it. A conversation that holds events but no row (imported, forked,
appended by an application) belongs to no source, and the ingest may not claim it. Only
``hand_over`` (an operator's decision) changes an owner."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, or_, select

from viewstore.domain.errors import (
    ConversationOwnedError,
    InvalidArgumentError,
)
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database import backends
from viewstore.store.database.schema import conversation_sources
from viewstore.store.lifecycle.erasure import refuse_if_erased
from viewstore.store.read.reads import aware, comparable
from viewstore.store.records import SourceInfo

_TEXT_LIMITS = {"source": 255, "execution_status": 64, "agent_kind": 255}


def check_source(source: object) -> None:
    limit = _TEXT_LIMITS["source"]
    if (
        not isinstance(source, str)
        or not 0 < len(source) <= limit
        or any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in source)
    ):
        raise InvalidArgumentError(
            f"source must be a name of 1..{limit} printable characters, got {source!r}"
        )


def check_info(info: SourceInfo) -> SourceInfo:
    check_source(info.source)
    for name, limit in _TEXT_LIMITS.items():
        value = getattr(info, name)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise InvalidArgumentError(f"{name} must be a string of at most {limit} characters")
    for name in ("created_at", "updated_at"):
        value = getattr(info, name)
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise InvalidArgumentError(f"{name} must be a datetime with a time zone")
    return info


def claim(conn: Connection, key: str, source: str, now: datetime) -> None:
    """Make ``source`` the owner of conversation ``key`` if it has none and holds no events;
    ``ConversationOwnedError`` if another source owns it or it holds events and no owner;
    ``ConversationErasedError`` if it was erased. In the caller's transaction."""
    # The conversation row first, as an erasure locks it: a claim racing an erasure waits for
    # it and then finds the tombstone, instead of leaving a row for an erased conversation.
    row = lock_conversation(conn, key)
    refuse_if_erased(conn, key)
    owner = owner_of(conn, key)
    if owner is None:
        if row is not None and row.version > 0:
            raise ConversationOwnedError(key, source, None)
        conn.execute(
            backends.of(conn)
            .insert(conversation_sources)
            .values(conversation_id=key, source=source, recorded_at=comparable(conn, now))
            .on_conflict_do_nothing(index_elements=[conversation_sources.c.conversation_id])
        )
        owner = owner_of(conn, key)  # a concurrent first claim may have won
    if owner != source:
        raise ConversationOwnedError(key, source, owner)


def owner_of(conn: Connection, key: str) -> str | None:
    found: str | None = conn.execute(
        select(conversation_sources.c.source).where(conversation_sources.c.conversation_id == key)
    ).scalar()
    return found


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
    statement = backends.of(conn).insert(conversation_sources).values(values)
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
