"""Shared helpers for the view tests: a tiny event builder and vector readers.

The builder follows the notation of docs/semantics.md: ``S`` system prompt, ``U`` user message,
``M`` agent message, ``A`` action, ``O`` observation, ``E`` agent error, ``J`` user rejection,
``C`` condensation, ``R`` condensation request, ``X`` state update (any non-LLM event). Every
builder takes the event id first, so tests can assert on readable ids; the events are real
OpenHands-shaped JSON objects run through :func:`parse_event`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from viewstore.domain.events import Event, parse_event
from viewstore.domain.view import View


def _event(payload: dict[str, Any]) -> Event:
    return parse_event(payload)


def S(eid: str = "S") -> Event:
    return _event(
        {
            "id": eid,
            "source": "agent",
            "system_prompt": {"type": "text", "text": "You are OpenHands agent."},
            "tools": [],
            "kind": "SystemPromptEvent",
        }
    )


def _message(eid: str, source: str, text: str, thinking: bool) -> Event:
    blocks = [{"type": "thinking", "thinking": "hm", "signature": "x"}] if thinking else []
    return _event(
        {
            "id": eid,
            "source": source,
            "llm_message": {
                "role": "user" if source == "user" else "assistant",
                "content": [{"type": "text", "text": text}],
                "thinking_blocks": blocks,
            },
            "kind": "MessageEvent",
        }
    )


def U(eid: str = "U", text: str = "please fix the bug") -> Event:
    return _message(eid, "user", text, thinking=False)


def M(eid: str = "M", text: str = "done", thinking: bool = False) -> Event:
    """An agent message; thinking blocks on a message never start a tool loop (m28)."""
    return _message(eid, "agent", text, thinking)


def A(eid: str, tc: str, r: str, thinking: bool = False) -> Event:
    """``A(tc, r)``: an action with ``tool_call_id=tc`` and ``llm_response_id=r``."""
    blocks = (
        [{"type": "thinking", "thinking": "let me look", "signature": "sig"}] if thinking else []
    )
    return _event(
        {
            "id": eid,
            "source": "agent",
            "thought": [],
            "thinking_blocks": blocks,
            "action": {"command": "ls", "kind": "TerminalAction"},
            "tool_name": "terminal",
            "tool_call_id": tc,
            "tool_call": {"id": tc, "name": "terminal", "arguments": "{}", "origin": "completion"},
            "llm_response_id": r,
            "security_risk": "LOW",
            "kind": "ActionEvent",
        }
    )


def O(eid: str, tc: str, content: str = "ok") -> Event:  # noqa: E743 - the spec's name
    return _event(
        {
            "id": eid,
            "source": "environment",
            "tool_name": "terminal",
            "tool_call_id": tc,
            "observation": {
                "content": [{"type": "text", "text": content}],
                "kind": "TerminalObservation",
            },
            "action_id": "whatever",
            "kind": "ObservationEvent",
        }
    )


def E(eid: str, tc: str) -> Event:
    """An ``AgentErrorEvent``: observation-like, no ``action_id``."""
    return _event(
        {
            "id": eid,
            "source": "agent",
            "tool_name": "terminal",
            "tool_call_id": tc,
            "error": "invalid tool call",
            "kind": "AgentErrorEvent",
        }
    )


def J(eid: str, tc: str, source: str = "user") -> Event:
    """A ``UserRejectObservation`` (``rejection_source`` user or hook)."""
    return _event(
        {
            "id": eid,
            "source": "user",
            "tool_name": "terminal",
            "tool_call_id": tc,
            "rejection_reason": "no",
            "rejection_source": source,
            "action_id": "whatever",
            "kind": "UserRejectObservation",
        }
    )


def C(
    eid: str,
    forget: Iterable[str] = (),
    summary: str | None = None,
    offset: int | None = None,
) -> Event:
    payload: dict[str, Any] = {
        "id": eid,
        "source": "environment",
        "forgotten_event_ids": list(forget),
    }
    if summary is not None:
        payload["summary"] = summary
    if offset is not None:
        payload["summary_offset"] = offset
    payload["kind"] = "Condensation"
    return _event(payload)


def R(eid: str = "R") -> Event:
    return _event({"id": eid, "source": "environment", "kind": "CondensationRequest"})


def X(eid: str = "X") -> Event:
    """A ``ConversationStateUpdateEvent``: not LLM-convertible, ignored by ``append_event``."""
    return _event(
        {
            "id": eid,
            "source": "environment",
            "key": "execution_status",
            "value": "running",
            "kind": "ConversationStateUpdateEvent",
        }
    )


def ids(items: Iterable[Any]) -> list[str]:
    return [item.id for item in items]


def live(events: Iterable[Event]) -> View:
    """The live path: ``append_event`` for each event, no enforcement."""
    view = View()
    for event in events:
        view.append_event(event)
    return view


# --------------------------------------------------------------------------- vectors


def read_stream(path: Path) -> list[Event]:
    with path.open(encoding="utf-8") as f:
        return [parse_event(line) for line in f if line.strip()]


def read_expected(path: Path) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return value


def _sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def digest(view_ids: Sequence[str], indices: Iterable[int], unhandled: bool) -> list[Any]:
    """``[len(view), view_digest, indices_digest, unhandled]`` as in the vectors README."""
    return [
        len(view_ids),
        _sha16("\n".join(view_ids)),
        _sha16(",".join(str(i) for i in sorted(indices))),
        int(unhandled),
    ]


def view_digest(view: View) -> list[Any]:
    return digest(view.event_ids, view.manipulation_indices, view.unhandled_condensation_request)


def rounds(view: View) -> list[tuple[str, list[str]]]:
    """Enforcement rounds as ``(property name, sorted removed ids)``."""
    return [(r.property, sorted(r.removed)) for r in view.enforcement_rounds]
