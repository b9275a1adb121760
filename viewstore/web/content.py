"""A readable rendering of an event's JSON: what a person wants to see of each kind.

Only reads the payload; the text it returns is untrusted and is escaped by the templates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Longest text shown inline; the event page shows the whole payload.
MAX_TEXT = 4000


@dataclass(frozen=True)
class Block:
    label: str
    text: str
    mono: bool = False  # code, arguments, tool output


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f" … [{len(text)} characters]"


def _texts(parts: Any) -> str:
    """The text of a content list (``[{"type": "text", "text": ...}, ...]``) or a string."""
    if isinstance(parts, str):
        return parts
    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list):
        return ""
    out = []
    for part in parts:
        if isinstance(part, dict):
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif part.get("type") == "image":
                out.append("[image]")
        elif isinstance(part, str):
            out.append(part)
    return "\n".join(out)


def _arguments(payload: dict[str, Any]) -> str:
    call = payload.get("tool_call")
    raw: Any = call.get("arguments") if isinstance(call, dict) else None
    if isinstance(raw, str):
        text = raw
        try:
            raw = json.loads(text)
        except ValueError:
            return text
    if raw is None:
        action = payload.get("action")
        raw = action.get("data", action) if isinstance(action, dict) else action
    return json.dumps(raw, indent=2, ensure_ascii=False, sort_keys=True)


def _thinking(payload: dict[str, Any]) -> list[Block]:
    blocks = payload.get("thinking_blocks") or []
    texts = [b.get("thinking", "") for b in blocks if isinstance(b, dict)]
    text = "\n".join(t for t in texts if isinstance(t, str) and t)
    return [Block("thinking", text)] if text else []


def _system(payload: dict[str, Any]) -> list[Block]:
    found = [Block("system prompt", _texts(payload.get("system_prompt")))]
    tools = [
        str(t.get("title") or t.get("kind"))
        for t in payload.get("tools") or []
        if isinstance(t, dict)
    ]
    return [*found, Block("tools", ", ".join(tools))] if tools else found


def _message(payload: dict[str, Any]) -> list[Block]:
    message = payload.get("llm_message") or {}
    role = str(message.get("role", "message"))
    return [*_thinking(message), Block(role, _texts(message.get("content")))]


def _action(payload: dict[str, Any]) -> list[Block]:
    found = _thinking(payload)
    thought = _texts(payload.get("thought"))
    if thought:
        found.append(Block("thought", thought))
    found.append(Block(f"call {payload.get('tool_name', '?')}", _arguments(payload), True))
    return found


def _observation(payload: dict[str, Any]) -> list[Block]:
    observation = payload.get("observation") or {}
    label = "error output" if observation.get("is_error") else "output"
    text = _texts(observation.get("content"))
    return [Block(f"{payload.get('tool_name', '?')} {label}", text, True)]


def _summary(payload: dict[str, Any]) -> list[Block]:
    found = []
    if payload.get("summary") is not None:
        found.append(Block("summary", str(payload["summary"])))
    if payload.get("kind") == "Condensation":
        forgotten = payload.get("forgotten_event_ids") or []
        offset = payload.get("summary_offset")
        found.append(Block("forgets", f"{len(forgotten)} events; summary at {offset}"))
    return found


def _other(payload: dict[str, Any]) -> list[Block]:
    rest = {
        k: v
        for k, v in payload.items()
        if k not in ("id", "timestamp", "source", "kind", "parent_id")
    }
    return [Block("payload", json.dumps(rest, ensure_ascii=False, sort_keys=True), True)]


_BY_KIND: dict[str, Callable[[dict[str, Any]], list[Block]]] = {
    "SystemPromptEvent": _system,
    "MessageEvent": _message,
    "ActionEvent": _action,
    "ObservationEvent": _observation,
    "AgentErrorEvent": lambda p: [Block("error", str(p.get("error", "")))],
    "UserRejectObservation": lambda p: [Block("rejected", str(p.get("rejection_reason", "")))],
    "Condensation": _summary,
    "CondensationSummaryEvent": _summary,
    "CondensationRequest": lambda p: [Block("request", "the context should be condensed")],
}


def blocks(payload: dict[str, Any]) -> list[Block]:
    """Labelled pieces of text that say what the event is."""
    render = _BY_KIND.get(str(payload.get("kind")), _other)
    return [Block(b.label, _clip(b.text), b.mono) for b in render(payload)]


def parse(payload_json: str) -> dict[str, Any]:
    try:
        value = json.loads(payload_json)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
