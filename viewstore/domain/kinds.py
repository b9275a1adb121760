"""The kinds of OpenHands events, what each is to the view, and the ids and JSON text viewstore
keeps: the constants of ``viewstore.domain.events`` without its model, so that code which only names
kinds (the read path, the command line) does not import pydantic (docs/semantics.md §2).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any


class Role(StrEnum):
    """What an event is to the view logic."""

    ACTION = "action"
    OBSERVATION = "observation"
    MESSAGE = "message"  # any other LLM-convertible event: system prompt, message, summary
    CONDENSATION = "condensation"
    REQUEST = "request"
    OTHER = "other"  # not LLM-convertible: ignored by the view


KIND_ROLES: dict[str, Role] = {
    "SystemPromptEvent": Role.MESSAGE,
    "MessageEvent": Role.MESSAGE,
    "CondensationSummaryEvent": Role.MESSAGE,
    "ActionEvent": Role.ACTION,
    "ObservationEvent": Role.OBSERVATION,
    "UserRejectObservation": Role.OBSERVATION,
    "AgentErrorEvent": Role.OBSERVATION,
    "Condensation": Role.CONDENSATION,
    "CondensationRequest": Role.REQUEST,
    "ConversationStateUpdateEvent": Role.OTHER,
    "PauseEvent": Role.OTHER,
    "InterruptEvent": Role.OTHER,
    "ConversationErrorEvent": Role.OTHER,
    "HookExecutionEvent": Role.OTHER,
    "SecurityAnalysisEvent": Role.OTHER,
    "TokenEvent": Role.OTHER,
    "ACPToolCallEvent": Role.OTHER,
    "LLMCompletionLogEvent": Role.OTHER,
    "StreamingDeltaEvent": Role.OTHER,
}

SUMMARY_KIND = "CondensationSummaryEvent"
#: What a condensation appends to its own id to name the summary it inserts (Event.summary_id).
SUMMARY_SUFFIX = "-summary"
STATE_UPDATE_KIND = "ConversationStateUpdateEvent"
CONVERSATION_ERROR_KIND = "ConversationErrorEvent"
ROOT_ID = "__root__"
MAX_ID_LENGTH = 512

_ID_FORBIDDEN = frozenset("/\\") | frozenset(chr(c) for c in range(32)) | {"\x7f"}


# json.dumps with arguments builds an encoder each call, a tenth of an append's parse.
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def canonical_json(value: Any) -> str:
    """The text viewstore stores for a JSON value: compact, key order kept, UTF-8 safe."""
    return _CANONICAL.encode(value)


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an event id, or None when it can."""
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long, the limit is {MAX_ID_LENGTH}"
    bad = _ID_FORBIDDEN.intersection(value)
    if bad:
        shown = ", ".join(sorted(repr(c) for c in bad))
        return f"contains characters not allowed in an event id: {shown}"
    # UTF-8 cannot encode a lone surrogate (JSON's "\ud800" escape gives one): no database
    # could store or look up such an id.
    if not value.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        return "is not valid Unicode text (a lone surrogate)"
    return None
