"""A posted ``ConversationInfo`` (the agent server's webhook, or its REST conversation search)
as a ``SourceInfo`` row: the few fields the catalogue keeps, read defensively (the agent is a
discriminated union whose shape differs by kind; a field that is missing is None)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store import EventStore, SourceInfo

_MAX_TEXT = 4096


def from_webhook(body: Any, source: str = "") -> SourceInfo:
    """The row for ``body`` (a ``ConversationInfo`` as JSON); ``InvalidArgumentError`` when it
    has no conversation id."""
    if not isinstance(body, dict):
        raise InvalidArgumentError("the body must be a JSON object (a ConversationInfo)")
    try:
        key = uuid.UUID(str(body.get("id"))).hex
    except ValueError as error:
        raise InvalidArgumentError("the conversation info has no UUID id") from error
    agent = _object(body.get("agent"))
    llm = _object(agent.get("llm"))
    tags = _object(body.get("tags"))
    return SourceInfo(
        conversation_id=key,
        source=source,
        title=_text(body.get("title"), _MAX_TEXT),
        execution_status=_text(body.get("execution_status"), 64),
        agent_kind=_text(agent.get("kind"), 255),
        llm_model=_text(llm.get("model"), _MAX_TEXT),
        created_at=_time(body.get("created_at")),
        updated_at=_time(body.get("updated_at")),
        tags={str(k)[:255]: str(v)[:_MAX_TEXT] for k, v in list(tags.items())[:100]},
    )


def save(store: EventStore, record: SourceInfo, source: str) -> None:
    store.save_conversation_info(replace(record, source=source))


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    # The agent server writes naive UTC times (utc_now() without an offset in some models).
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
