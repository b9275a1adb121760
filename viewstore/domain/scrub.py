"""The redacted payload of an event: its content gone, its structure exactly as it was.

Kept: the top-level fields ``ENVELOPE`` names (kind, id, source, timestamp, parent id,
tool-call and LLM-response ids, forgotten ids, summary offset) and, at any depth, those
``KEPT_ANYWHERE`` names (type, role and tool names, ids, enumerated states: what the view and
a parser of the event need, not what anyone said). Every other string, or every other string
under the JSON Pointers (RFC 6901) given, becomes ``MARK``; numbers, booleans and the shape of
the JSON stay, so the event still parses as what it was (the OpenHands SDK's own models read
every redacted reference event back, whatever path was redacted:
tests/openhands/test_redacted_events.py, tests/openhands/test_redaction_paths.py).

One rule for both ways of redacting: a path never replaces a string the whole-content
redaction keeps. A path at or into a kept field is refused (``UnredactablePathError``); a path
at an object or array redacts what is inside it except the kept fields, exactly as the
whole-content redaction treats the same object. A redaction that would still change anything
the view is built from is refused. Pure: no SQL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from viewstore.domain.errors import InvalidArgumentError, InvalidEventError, UnredactablePathError
from viewstore.domain.events import Event, canonical_json, parse_event

MARK = "[redacted]"
#: What compaction (retention: docs/retention.md) leaves where content was, so a compacted event
#: reads as such, not as redacted by someone.
COMPACTED = "[compacted]"
#: Either marker: a string that is one was removed already, and a later round leaves it (its
#: record holds the digest of what it replaced; recording the marker's own would contradict it).
MARKS = frozenset({MARK, COMPACTED})
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
#: Nested fields kept wherever they are: what a parser of the event (the view, the OpenHands
#: SDK's models, the LLM APIs an event is replayed to) needs to read it back. The names of
#: types and discriminators (a ``Literal`` in the SDK's models: ``kind``, ``type``), roles,
#: enumerated states, tool names (the SDK looks a tool up by its name), and ids (an event's
#: id is referenced by other events; a tool call's and a Responses item's are echoed back to
#: the LLM, which pairs them). None carries what a user or a tool said.
#: tests/openhands/test_redaction_paths.py checks every constrained field of the SDK's models
#: is here.
KEPT_ANYWHERE = frozenset(
    {
        # types, discriminators, roles
        "kind",
        "type",
        "role",
        "action_type",
        "observation_type",
        # tools, looked up by name
        "name",
        "tool_name",
        "client_tool_name",
        # ids
        "id",
        "action_id",
        "message_id",
        "tool_call_id",
        "llm_response_id",
        "responses_item_id",
        "error_id",
        "usage_id",
        # enumerated states
        "source",
        "security_risk",
        "risks",
        "status",
        "origin",
        "hook_event_type",
        "user_action",
        "rejection_source",
        "taskSupport",
    }
)


def digest(payload: str) -> str:
    """The SHA-256 of a payload's UTF-8 text, as the redaction records and the guard take it."""
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# -- the new payload ----------------------------------------------------------------------


def _scrub(value: Any, key: str | None, mark: str = MARK) -> Any:
    if key in KEPT_ANYWHERE:
        return value
    if isinstance(value, str):
        return value if value in MARKS else mark
    if isinstance(value, dict):
        return {name: _scrub(inner, name, mark) for name, inner in value.items()}
    if isinstance(value, list):
        return [_scrub(inner, key, mark) for inner in value]
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
        raise UnredactablePathError(
            event_id,
            path,
            tokens[0],
            f"is part of the envelope the view is built from ({', '.join(sorted(ENVELOPE))})",
        )
    parent: Any = obj
    for depth, token in enumerate(tokens):
        if isinstance(parent, dict) and token in parent:
            key: Any = token
        elif isinstance(parent, list) and token.isdigit() and int(token) < len(parent):
            key = int(token)
        else:
            raise InvalidArgumentError(f"event {event_id!r} has no value at {path}")
        # Checked on the way down, not only at the end: the whole-content redaction keeps a
        # kept field's value whole, so a path into it (a list of ids, an enum map) is refused.
        if isinstance(key, str) and key in KEPT_ANYWHERE:
            where = "names" if depth == len(tokens) - 1 else "goes into"
            raise UnredactablePathError(
                event_id,
                path,
                key,
                f"{where} {key!r}, a field the event is parsed by (a type, role or tool name, "
                "an id or an enumerated state, which the view or the OpenHands SDK's models "
                "need)",
            )
        if depth == len(tokens) - 1:
            parent[key] = _scrub(parent[key], None)
        else:
            parent = parent[key]


def view_envelope(event: Event) -> tuple[Any, ...]:
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


def redacted_payload(payload: str, paths: Sequence[str] | None, *, mark: str = MARK) -> str:
    """``payload`` with all its content (``paths`` None) or the strings under ``paths``
    replaced by ``mark`` (``MARK``, or ``COMPACTED`` for retention); the envelope stays
    exactly as it was, and so does a string an earlier round already replaced."""
    before = parse_event(payload)
    obj = json.loads(payload)
    if paths is None:
        obj = {
            key: value if key in ENVELOPE else _scrub(value, key, mark)
            for key, value in obj.items()
        }
    else:
        for path in paths:
            _redact_path(obj, path, before.id)
    try:
        after = parse_event(canonical_json(obj))
    except InvalidEventError as error:
        message = f"event {before.id!r}: redacted, it would not parse: {error}"
        raise InvalidArgumentError(message) from error
    if view_envelope(after) != view_envelope(before):
        raise InvalidArgumentError(
            f"event {before.id!r}: redacting these paths would change what the view is built "
            "from (the event's role, tool-call or response ids, thinking blocks or summary)"
        )
    return after.payload_json
