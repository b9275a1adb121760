"""``viewstore_recall``: an OpenHands tool with which a running agent reads back what its
condensations forgot, from the store (docs/recall.md).

The agent calls it like any tool: ``query`` searches its own conversation's forgotten events
(``store.search``, window ``forgotten``), ``condensation`` expands a condensation (or its
summary, ``<id>-summary``) into the events it forgot. Its result is an ordinary observation:
it enters the log and the view like any tool's, so the next request carries it. It is bounded
(``max_chars``, default 8,000), shows a redacted, compacted or masked string as removed, never
as it was, and reads other conversations only when the tool is given ``scope="store"``.

The tool finds its store through ``bind``, which ``open_conversation`` calls for the
conversation it opens: the store's URL, which may hold a password, is never written into the
agent's persisted tool list.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from openhands.sdk.tool import (
    Action,
    Observation,
    ToolDefinition,
    ToolExecutor,
    register_tool,
)
from pydantic import Field

from viewstore.domain.masking import MARK_PREFIX
from viewstore.domain.scrub import ENVELOPE, KEPT_ANYWHERE, MARKS
from viewstore.store import EventStore, StoredEvent

NAME = "viewstore_recall"
DEFAULT_MAX_CHARS = 8000
_HITS = 8
_REMOVED = "(content removed)"

_stores: dict[str, EventStore] = {}
_lock = threading.Lock()


def bind(conversation_id: str, store: EventStore) -> None:
    """Make ``store`` the one the tool reads for ``conversation_id`` (its hex UUID)."""
    with _lock:
        _stores[conversation_id] = store


def _bound(conversation_id: str) -> EventStore:
    with _lock:
        found = _stores.get(conversation_id)
    if found is None:
        raise RuntimeError(
            f"{NAME}: no store for conversation {conversation_id}: open it with "
            "viewstore.openhands.open_conversation"
        )
    return found


class RecallAction(Action):
    query: str | None = Field(
        default=None,
        description="Words to look for in what was forgotten from this conversation "
        "(every word must be in an event)",
    )
    condensation: str | None = Field(
        default=None,
        description="The id of a condensation, or of its summary ('<id>-summary'), to expand "
        "into the events it forgot",
    )


class RecallObservation(Observation):
    pass


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        removed = value in MARKS or value.startswith(MARK_PREFIX)
        yield _REMOVED if removed else value
    elif isinstance(value, dict):
        for key, inner in value.items():
            # Ids, kinds, names and states: structure, not what was said or done.
            if key not in KEPT_ANYWHERE and key not in ENVELOPE:
                yield from _texts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _texts(inner)


def render(event: StoredEvent, limit: int) -> str:
    """An event as the agent reads it back: its kind, id and seq, then its text, cut."""
    parts: list[str] = []
    for found in _texts(event.payload):
        part = " ".join(found.split())
        if part and not (part == _REMOVED and parts[-1:] == [_REMOVED]):
            parts.append(part)
    text = " ".join(parts)
    if len(text) > limit:
        text = text[:limit] + " …"
    return f"[{event.kind} {event.event_id}, seq {event.seq}] {text}"


class RecallExecutor(ToolExecutor[RecallAction, RecallObservation]):
    def __init__(self, conversation_id: str, *, max_chars: int, scope: str) -> None:
        self.conversation_id = conversation_id
        self.max_chars = max_chars
        self.scope = scope

    def __call__(self, action: RecallAction, conversation: Any = None) -> RecallObservation:
        store = _bound(self.conversation_id)
        try:
            if action.condensation:
                found = self._expand(store, action.condensation)
            elif action.query:
                found = self._search(store, action.query)
            else:
                return RecallObservation.from_text(
                    "give a query or a condensation id", is_error=True
                )
        except ValueError as error:  # a bad query or id: the agent may try again
            return RecallObservation.from_text(str(error), is_error=True)
        return RecallObservation.from_text(self._bounded(found))

    def _search(self, store: EventStore, query: str) -> list[StoredEvent]:
        scoped = self.conversation_id if self.scope == "conversation" else None
        page = store.search(query, conversation_id=scoped, window="forgotten", limit=_HITS)
        found = []
        for hit in page.hits:
            event = store.event(hit.conversation_id, hit.event_id)
            if event is not None:
                found.append(event)
        return found

    def _expand(self, store: EventStore, wanted: str) -> list[StoredEvent]:
        key = wanted.removesuffix("-summary")
        for record in store.condensations(self.conversation_id):
            if record.event_id == key:
                events = (store.event(self.conversation_id, eid) for eid, _ in record.forgotten)
                return [event for event in events if event is not None]
        raise ValueError(f"no condensation {wanted!r} in this conversation")

    def _bounded(self, found: Sequence[StoredEvent]) -> str:
        if not found:
            return "nothing forgotten matches"
        each = max(200, self.max_chars // len(found))
        lines: list[str] = []
        used = 0
        for event in found:
            line = render(event, each)
            if used + len(line) > self.max_chars:
                lines.append(f"… {len(found) - len(lines)} more not shown")
                break
            lines.append(line)
            used += len(line) + 1
        return "\n".join(lines)


class ViewstoreRecallTool(ToolDefinition[RecallAction, RecallObservation]):
    # The SDK names a tool after its class (ViewstoreRecallTool: viewstore_recall), the name
    # the LLM calls it by, which must be the one it is registered under.
    """``Tool(name="viewstore_recall", params={"max_chars": 8000, "scope": "conversation"})``."""

    @classmethod
    def create(cls, conv_state: Any = None, **params: Any) -> Sequence[ViewstoreRecallTool]:
        scope = params.get("scope", "conversation")
        if scope not in ("conversation", "store"):
            raise ValueError(f"{NAME}: scope must be 'conversation' or 'store', got {scope!r}")
        max_chars = int(params.get("max_chars", DEFAULT_MAX_CHARS))
        conversation_id = conv_state.id.hex
        return [
            cls(
                description=(
                    "Read back what this conversation's condensations forgot, from the store: "
                    "give `query` (words; every one must be in an event) to search the "
                    "forgotten events, or `condensation` (a condensation's or summary's id) to "
                    "see the events it replaced."
                ),
                action_type=RecallAction,
                observation_type=RecallObservation,
                executor=RecallExecutor(conversation_id, max_chars=max_chars, scope=scope),
            )
        ]


register_tool(NAME, ViewstoreRecallTool)
