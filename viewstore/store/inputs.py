"""Conversation ids and integer arguments, checked before any SQL (an append's events are
checked by ``viewstore.store.append.batch``)."""

from __future__ import annotations

import re
import uuid

from viewstore.domain.errors import InvalidArgumentError

DEFAULT_MAX_EVENT_BYTES = 64 * 1024 * 1024
MAX_CONVERSATION_ID_LENGTH = 255


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
