"""Helpers of the store-backed server tests: servers started on a store, and the checks that
compare what a server serves and what its LLM was sent with what the store holds."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from viewstore import EventStore

from ..ingest._fleet import AgentServer, ScriptedLLM, http, start_agent_server

#: Short enough that a takeover test waits seconds, long enough that a busy machine renews.
LEASE_TTL = 4
IDLE_SECONDS = "2"


def start_on_store(name: str, root: Path, url: str, **options: Any) -> AgentServer:
    env = {"VIEWSTORE_IDLE_SECONDS": IDLE_SECONDS}
    return start_agent_server(
        name, root / name, None, on_store=url, store_env=env, lease_ttl=LEASE_TTL, **options
    )


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "run": True}


def post_message(server: AgentServer, conversation: str, text: str) -> tuple[int, Any]:
    path = f"/api/conversations/{conversation}/events"
    return http("POST", server.url + path, message(text), server.headers)


def message_texts(store: EventStore, conversation: str) -> str:
    """Every stored message event of the conversation, as one text to search."""
    return " ".join(
        str(e.payload) for e in store.events(conversation) if e.payload["kind"] == "MessageEvent"
    )


def normalised(payload: dict[str, Any]) -> dict[str, Any]:
    """An event as JSON, its id sets sorted: the SDK keeps a condensation's forgotten ids in a
    set, which each process writes in its own hash order."""
    if isinstance(payload.get("forgotten_event_ids"), list):
        return {**payload, "forgotten_event_ids": sorted(payload["forgotten_event_ids"])}
    return payload


def assert_stored_equals_served(store: EventStore, server: AgentServer, conversation: str) -> int:
    """The stored log is the server's REST log: the same events in the same order, each once."""
    stored = [normalised(e.payload) for e in store.events(conversation)]
    served = [normalised(e) for e in server.events(conversation)]
    ids = [e["id"] for e in stored]
    assert len(ids) == len(set(ids)), "an event stored twice"
    assert stored == served
    return len(stored)


def calls_and_results_of_view(payloads: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The tool calls and results of a view in order, as the SDK sends them: a call whose
    result is not in the view (the one a killed server never finished) is left out."""
    found = []
    for event in payloads:
        kind = event.get("kind")
        if kind == "ActionEvent":
            found.append(("call", event["tool_call_id"]))
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            found.append(("result", event["tool_call_id"]))
    answered = {key for what, key in found if what == "result"}
    return [(what, key) for what, key in found if what == "result" or key in answered]


def calls_and_results_of_request(request: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for item in request.get("messages", []):
        if item.get("role") == "assistant":
            found += [("call", call["id"]) for call in item.get("tool_calls") or []]
        elif item.get("role") == "tool":
            found.append(("result", item["tool_call_id"]))
    return found


class SentViews:
    """What the LLM was sent for one conversation, each request beside the store's view of the
    conversation at that moment (the agent appends every event before it calls the LLM)."""

    def __init__(self, llm: ScriptedLLM, store: EventStore) -> None:
        self.llm, self.store = llm, store
        self.first: str | None = None
        self.conversation: str | None = None
        self.seen: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self.resumed: list[Any] = []
        self.lock = threading.Lock()

    def watch(self, first: str, conversation: str) -> None:
        """Record requests whose first user message starts with ``first`` (a condenser's
        summary may follow it there)."""
        self.first, self.conversation = first, conversation
        self.llm.on_request = self._on_request

    def _on_request(self, first: str, request: dict[str, Any]) -> None:
        if self.first is None or self.conversation is None:
            return
        if not first.startswith(self.first) or not request.get("tools"):
            return
        view = [json.loads(text) for text in self.store.view(self.conversation).payloads]
        resumed = [json.loads(t) for t in self.store.resume_view(self.conversation).payloads]
        with self.lock:
            self.seen.append((request, view))
            self.resumed.append(resumed)


@contextlib.contextmanager
def stopped(*servers: AgentServer) -> Iterator[None]:
    try:
        yield
    finally:
        for server in servers:
            with contextlib.suppress(Exception):
                server.stop()
