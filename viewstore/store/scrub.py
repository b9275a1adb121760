"""The redacted payload of an event: its content gone, its envelope exactly as it was.

Kept: the top-level fields ``ENVELOPE`` names (kind, id, source, timestamp, parent id,
tool-call and LLM-response ids, forgotten ids, summary offset) and, at any depth, those
``KEPT_ANYWHERE`` names (type, role and tool names, ids, enumerated states: what a parser of
the event needs, not what anyone said). Every other string, or every string under the JSON
Pointers (RFC 6901) given, becomes ``MARK``; numbers, booleans and the shape of the JSON stay,
so the event still parses as what it was (the OpenHands SDK's own models read every redacted
reference event back: tests/openhands/test_redacted_events.py). A redaction that would change
anything the view is built from is refused. Pure: no SQL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from viewstore.errors import InvalidArgumentError, InvalidEventError
from viewstore.events import Event, canonical_json, parse_event

MARK = "[redacted]"
#: Top-level fields the view logic (or a reader of the log) relies on: never redacted.
ENVELOPE = frozenset(
    {
        "kind",
        "id",
        "source",
        "timestamp",
        "parent_id",
        "tool_call_id",
        "llm_response_id",
        "forgotten_event_ids",
        "summary_offset",
    }
)
#: Nested fields kept wherever they are: names of types, roles, tools and enumerated states,
#: and ids, which a parser of the event (the OpenHands SDK's models) needs to read it back;
#: none carries what a user or a tool said.
KEPT_ANYWHERE = frozenset(
    {
        "kind",
        "type",
        "role",
        "id",
        "name",
        "tool_name",
        "action_id",
        "tool_call_id",
        "llm_response_id",
        "source",
        "security_risk",
        "risks",
        "status",
        "origin",
        "hook_event_type",
        "user_action",
        "rejection_source",
        "action_type",
        "observation_type",
    }
)


def digest(payload: str) -> str:
    """The SHA-256 of a payload's UTF-8 text, as the redaction records and the guard take it."""
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# -- the new payload ----------------------------------------------------------------------


def _scrub(value: Any, key: str | None) -> Any:
    if key in KEPT_ANYWHERE:
        return value
    if isinstance(value, str):
        return MARK
    if isinstance(value, dict):
        return {name: _scrub(inner, name) for name, inner in value.items()}
    if isinstance(value, list):
        return [_scrub(inner, key) for inner in value]
    return value


def _tokens(path: str) -> list[str]:
    """A JSON Pointer (RFC 6901) as its reference tokens."""
    if not isinstance(path, str) or not path.startswith("/") or path == "/":
        raise InvalidArgumentError(
            f"a path must be a JSON Pointer to a field inside the event, like "
            f"/observation/content, got {path!r}"
        )
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _redact_path(obj: dict[str, Any], path: str, event_id: str) -> None:
    tokens = _tokens(path)
    if tokens[0] in ENVELOPE:
        raise InvalidArgumentError(
            f"event {event_id!r}: {path} is part of the envelope the view is built from "
            f"({', '.join(sorted(ENVELOPE))}) and cannot be redacted"
        )
    parent: Any = obj
    for depth, token in enumerate(tokens):
        last = depth == len(tokens) - 1
        if isinstance(parent, dict) and token in parent:
            key: Any = token
        elif isinstance(parent, list) and token.isdigit() and int(token) < len(parent):
            key = int(token)
        else:
            raise InvalidArgumentError(f"event {event_id!r} has no value at {path}")
        if last:
            parent[key] = _scrub(parent[key], None)  # named outright: redacted even if kept
        else:
            parent = parent[key]


def _envelope(event: Event) -> tuple[Any, ...]:
    return (
        event.kind,
        event.id,
        event.role,
        event.source,
        event.timestamp,
        event.parent_id,
        event.tool_call_id,
        event.llm_response_id,
        event.thinking,
        event.forgotten_event_ids,
        event.summary_offset,
        event.summary is None,
    )


def redacted_payload(payload: str, paths: Sequence[str] | None) -> str:
    """``payload`` with all its content (``paths`` None) or the strings under ``paths``
    replaced by ``MARK``; the envelope stays exactly as it was."""
    before = parse_event(payload)
    obj = json.loads(payload)
    if paths is None:
        obj = {key: value if key in ENVELOPE else _scrub(value, key) for key, value in obj.items()}
    else:
        for path in paths:
            _redact_path(obj, path, before.id)
    try:
        after = parse_event(canonical_json(obj))
    except InvalidEventError as error:
        message = f"event {before.id!r}: redacted, it would not parse: {error}"
        raise InvalidArgumentError(message) from error
    if _envelope(after) != _envelope(before):
        raise InvalidArgumentError(
            f"event {before.id!r}: redacting these paths would change what the view is built "
            "from (the event's role, tool-call or response ids, thinking blocks or summary)"
        )
    return after.payload_json
