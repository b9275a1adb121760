"""What an append accepts: conversation ids and batches of events, checked before any SQL."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from viewstore.errors import InvalidArgumentError, InvalidEventError
from viewstore.events import Event, parse_event

# BaseModel: an OpenHands SDK event object, stored as the SDK writes it (see parse_event).
EventInput = Event | BaseModel | dict[str, Any] | str | bytes
DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024
MAX_CONVERSATION_ID_LENGTH = 255


# Fields copied into columns of their own. PostgreSQL text cannot hold NUL (SQLite can), so
# such an event is rejected on every backend alike; NUL elsewhere in a payload is kept exactly.
_COLUMN_FIELDS = ("kind", "source", "timestamp", "parent_id", "tool_call_id", "llm_response_id")


def _reject_nul_in_columns(event: Event, index: int) -> None:
    for name in _COLUMN_FIELDS:
        value = getattr(event, name)
        if value is not None and "\x00" in value:
            raise InvalidEventError(
                "must not contain a NUL character",
                kind=event.kind,
                event_id=event.id,
                field=name,
                index=index,
            )
    if any("\x00" in forgotten for forgotten in event.forgotten_event_ids):
        raise InvalidEventError(
            "must not contain an id with a NUL character",
            kind=event.kind,
            event_id=event.id,
            field="forgotten_event_ids",
            index=index,
        )


# A UUID written with dashes (how OpenHands prints a ConversationID).
_DASHED_UUID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


def conversation_key(conversation_id: str | uuid.UUID) -> str:
    """Validate a conversation id; UUIDs, as objects or dashed strings, are stored as 32
    lowercase hex digits, as OpenHands names their folders."""
    if isinstance(conversation_id, uuid.UUID):
        return conversation_id.hex
    if isinstance(conversation_id, str) and _DASHED_UUID.fullmatch(conversation_id):
        return uuid.UUID(conversation_id).hex
    if not isinstance(conversation_id, str):
        raise InvalidArgumentError(
            f"conversation id must be a string, got {type(conversation_id).__name__}"
        )
    if not conversation_id or len(conversation_id) > MAX_CONVERSATION_ID_LENGTH:
        raise InvalidArgumentError(
            f"conversation id must be 1..{MAX_CONVERSATION_ID_LENGTH} characters long"
        )
    if any(ord(c) < 32 or c in "/\\" for c in conversation_id):
        raise InvalidArgumentError(
            f"conversation id {conversation_id!r} contains a control character or a slash"
        )
    return conversation_id


def parse_batch(events: EventInput | Iterable[EventInput], max_bytes: int) -> list[Event]:
    """Parse and check one append's events; the first bad one raises, naming its position."""
    if isinstance(events, BaseModel | dict | str | bytes | bytearray):
        events = [events]
    elif not isinstance(events, Iterable):
        raise InvalidArgumentError(
            f"events must be an event or an iterable of events, got {type(events).__name__}"
        )
    parsed: list[Event] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(events):
        try:
            event = parse_event(raw, max_bytes=max_bytes)
        except InvalidEventError as error:
            raise error.at_index(index) from error
        _reject_nul_in_columns(event, index)
        if event.id in seen:
            raise InvalidEventError(
                f"appears twice in one batch (first at #{seen[event.id]})",
                kind=event.kind,
                event_id=event.id,
                field="id",
                index=index,
            )
        seen[event.id] = index
        parsed.append(event)
    return parsed
