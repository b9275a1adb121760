"""What an append accepts: conversation ids and batches of events, checked before any SQL."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from sqlalchemy import String

from viewstore.errors import InvalidArgumentError, InvalidEventError
from viewstore.events import Event, Role, parse_event
from viewstore.store.database.schema import condensation_forgotten, events, view_entries

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


def _limit(column: Any) -> int:
    column_type = column.type
    assert isinstance(column_type, String) and column_type.length is not None
    return column_type.length


# Every event field stored in a bounded (VARCHAR(n)) column, with its column's limit. A limit is
# checked here, before any write, rather than left to the database: SQLite stores any length,
# PostgreSQL refuses an over-long value on the ordinary path but an explicit cast (as the fast
# path's single statement needs) silently truncates it. Checked here, both paths and both
# backends accept exactly the same events, and storage never sees a value it could cut.
#
# Why limits rather than unbounded columns (a migration to TEXT): the limits are far above
# anything OpenHands writes (ISO timestamps, class names, short source tags, ids), PostgreSQL's
# ordinary path already refused every value they refuse, so no event a PostgreSQL store ever
# accepted is newly refused; and widening the columns would copy every table of a SQLite
# database (batch migration) for no event anyone produces. Stored events are never re-checked
# (rebuild and reads parse the log without these limits).
_BOUNDED_FIELDS = (
    ("kind", _limit(events.c.kind)),
    ("kind", _limit(view_entries.c.kind)),
    ("source", _limit(events.c.source)),
    ("source", _limit(view_entries.c.source)),
    ("timestamp", _limit(events.c.timestamp)),
    ("timestamp", _limit(view_entries.c.timestamp)),
    ("parent_id", _limit(events.c.parent_id)),
    ("parent_id", _limit(view_entries.c.parent_id)),
    ("id", _limit(events.c.event_id)),
)
_FORGOTTEN_ID_LIMIT = _limit(condensation_forgotten.c.event_id)
_VIEW_ID_LIMIT = _limit(view_entries.c.event_id)


def _check_lengths(event: Event, index: int) -> None:
    def refuse(field: str, length: int, limit: int, what: str = "") -> InvalidEventError:
        # An over-long kind is named by its start only: the message must stay one line.
        kind = event.kind if len(event.kind) <= 80 else event.kind[:40] + "..."
        return InvalidEventError(
            f"{what}is {length} characters long, the limit is {limit}",
            kind=kind,
            event_id=event.id,
            field=field,
            index=index,
        )

    for name, limit in _BOUNDED_FIELDS:
        value = getattr(event, name)
        if value is not None and len(value) > limit:
            raise refuse(name, len(value), limit)
    longest = max(event.forgotten_event_ids, key=len, default="")
    if len(longest) > _FORGOTTEN_ID_LIMIT:
        raise refuse("forgotten_event_ids", len(longest), _FORGOTTEN_ID_LIMIT, "holds an id that ")
    # A condensation's summary enters the view rows under the id "<id>-summary".
    if event.role is Role.CONDENSATION and event.inserts_summary:
        length = len(event.summary_id)
        if length > _VIEW_ID_LIMIT:
            raise refuse("id", length, _VIEW_ID_LIMIT, "names a summary whose id ")


# Conversation ids. A valid id is 1..255 characters of Unicode text that UTF-8 can encode
# (no lone surrogates), with no control character (U+0000..U+001F, U+007F), no "/" or "\",
# and is neither "." nor "..": so every id is one plain folder name on POSIX and Windows, and
# `viewstore export` can write OUT/<id>/ knowing it is inside OUT. Appends require a valid id.
# Reads, verify and rebuild also accept the ids earlier versions allowed ("." and "..", DEL),
# so a store that already holds such a conversation can still be read, checked and exported
# as JSONL; exporting it as a folder is refused (see viewstore.importers.openhands).
_TRAVERSAL_IDS = frozenset({".", ".."})


# A UUID written with dashes (how OpenHands prints a ConversationID).
_DASHED_UUID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


def conversation_key(conversation_id: str | uuid.UUID) -> str:
    """Check a conversation id for a read (the lenient rule above); UUIDs, as objects or dashed
    strings, are stored as 32 lowercase hex digits, as OpenHands names their folders."""
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
    try:
        conversation_id.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidArgumentError(
            f"conversation id {conversation_id!r} is not valid Unicode text (a lone surrogate "
            f"at position {error.start}; a name that was not UTF-8?)"
        ) from error
    return conversation_id


def new_conversation_key(conversation_id: str | uuid.UUID) -> str:
    """Check a conversation id for an append (the full rule above)."""
    key = conversation_key(conversation_id)
    if key in _TRAVERSAL_IDS:
        raise InvalidArgumentError(f"conversation id {key!r} is not allowed (a path component)")
    if "\x7f" in key:
        raise InvalidArgumentError(f"conversation id {key!r} contains a control character")
    return key


# Integers of the public API (seqs, versions, limits) are stored or compared as 64-bit SQL
# integers: a larger one is the caller's mistake, refused before the database sees it (SQLite's
# driver raises OverflowError, PostgreSQL "bigint out of range").
MAX_SQL_INTEGER = 2**63 - 1


def check_integer(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as an int in ``minimum..MAX_SQL_INTEGER``, else ``InvalidArgumentError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    if not minimum <= value <= MAX_SQL_INTEGER:
        raise InvalidArgumentError(
            f"{name} must be an integer between {minimum} and {MAX_SQL_INTEGER}, got {value!r}"
        )
    return value


def _event_input(raw: object, max_bytes: int) -> Event:
    """An event to append. An ``Event`` object is checked again from its ``payload_json``
    (whoever built it may have skipped ``parse_event``): a payload that is not JSON, too deep,
    or not UTF-8 would otherwise be stored, and fields that disagree with it would make the
    rows differ from a replay."""
    if not isinstance(raw, Event):
        return parse_event(raw, max_bytes=max_bytes)  # type: ignore[arg-type]
    event = parse_event(raw.payload_json, max_bytes=max_bytes)
    differing = [
        name
        for name in Event.model_fields
        if name != "payload_json" and getattr(raw, name, None) != getattr(event, name)
    ]
    if differing:
        raise InvalidEventError(
            f"the Event's fields {', '.join(differing)} differ from its payload_json "
            "(build Events with parse_event)",
            kind=event.kind,
            event_id=event.id,
        )
    return event


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
            event = _event_input(raw, max_bytes)
        except InvalidEventError as error:
            raise error.at_index(index) from error
        _reject_nul_in_columns(event, index)
        _check_lengths(event, index)
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
