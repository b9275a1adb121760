"""The recall tool through the real SDK (docs/recall.md): an agent whose condenser forgot its
first tool calls asks ``viewstore_recall`` for one of them by its words, then expands a
condensation; each answer is an ordinary observation, stored in the log and in the live view,
so the next request to the LLM carries it. The forgotten content comes back; a redacted one
never does; another conversation's is not searched."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from openhands.sdk import Agent, LLMSummarizingCondenser, Message, TextContent
from openhands.sdk.llm import MessageToolCall
from openhands.sdk.testing import TestLLM
from openhands.sdk.tool import Tool

from tests.openhands._agent import sdk_view, store_view
from viewstore import EventStore
from viewstore.openhands import open_conversation
from viewstore.openhands.recall import NAME, RecallAction, RecallExecutor, bind


def _call(name: str, arguments: dict[str, Any]) -> MessageToolCall:
    return MessageToolCall(
        id=f"call-{uuid.uuid4().hex[:12]}",
        name=name,
        arguments=json.dumps(arguments),
        origin="completion",
    )


def _reply(*calls: MessageToolCall) -> Message:
    return Message(role="assistant", content=[TextContent(text="")], tool_calls=list(calls))


#: Every request the agent's LLM was sent, in order: its messages as JSON.
SENT: list[str] = []


class RecordingLLM(TestLLM):
    """The SDK's scripted LLM, keeping what each request carried."""

    def completion(self, messages: list[Message], *args: Any, **kwargs: Any) -> Any:
        SENT.append(json.dumps([m.model_dump(mode="json") for m in messages]))
        return super().completion(messages, *args, **kwargs)


def _agent(script: list[Message], max_size: int = 6) -> Agent:
    summaries = [
        Message(role="assistant", content=[TextContent(text=f"summary {i}")]) for i in range(50)
    ]
    return Agent(
        llm=RecordingLLM.from_messages(script),
        tools=[Tool(name="append_line"), Tool(name=NAME, params={"max_chars": 2000})],
        condenser=LLMSummarizingCondenser(
            llm=TestLLM.from_messages(summaries), max_size=max_size, keep_first=1
        ),
    )


def _recall_outputs(store: EventStore, cid: uuid.UUID) -> list[tuple[str, str]]:
    found = []
    for event in store.events(cid):
        if event.kind == "ObservationEvent" and event.payload.get("tool_name") == NAME:
            text = " ".join(c.get("text", "") for c in event.payload["observation"]["content"])
            found.append((event.event_id, text))
    return found


def test_an_agent_recalls_what_its_condenser_forgot(db_url: str, tmp_path: Path) -> None:
    import tests.openhands._agent  # noqa: F401, PLC0415 - registers append_line

    lines = [f"kiwi-{i}x" for i in range(8)]
    script = [_reply(_call("append_line", {"line": line})) for line in lines]
    script.append(_reply(_call(NAME, {"query": "kiwi 0x"})))
    script.append(Message(role="assistant", content=[TextContent(text="done")]))
    cid = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        # One condensation, early enough that the recall and its answer stay in the view.
        conversation = open_conversation(
            store, _agent(script, max_size=14), tmp_path / "ws", cid, visualizer=None
        )
        SENT.clear()
        conversation.send_message("Write the lines, then recall the first.")
        conversation.run()
        # The first line's call and result were forgotten before the recall ran.
        first = [e.event_id for e in store.events(cid) if "kiwi-0x" in e.payload_json][:2]
        assert first and not set(first) & set(store.view(cid).event_ids)
        [(observation, text)] = _recall_outputs(store, cid)
        assert "kiwi-0x" in text and all(eid in text for eid in first)
        # An ordinary observation: the request that asked for it no longer carried the line,
        # the next one (the last) carries it again.
        assert "kiwi-0x" not in SENT[-2] and "kiwi-0x" in SENT[-1]
        assert observation in store.view(cid).event_ids
        assert sdk_view(conversation) == store_view(store, cid)
        assert store.verify(cid).ok


def test_expanding_a_condensation_and_what_is_never_shown(db_url: str, tmp_path: Path) -> None:
    """Called directly, as the SDK calls it: a condensation's forgotten events come back, a
    redacted one as removed; the search stays in its conversation; a bad id is an error the
    agent reads."""
    import tests.openhands._agent  # noqa: F401, PLC0415

    cid = uuid.uuid4()
    script = [_reply(_call("append_line", {"line": f"pear-{i}y"})) for i in range(8)]
    script.append(Message(role="assistant", content=[TextContent(text="done")]))
    with EventStore(db_url) as store:
        store.create_schema()
        conversation = open_conversation(
            store, _agent(script), tmp_path / "ws", cid, visualizer=None
        )
        conversation.send_message("Write the lines.")
        conversation.run()
        [condensation, *_] = store.condensations(cid)
        forgotten = [eid for eid, _ in condensation.forgotten]
        secret = next(
            e for e in store.events(cid) if e.event_id in forgotten and "pear" in e.payload_json
        )
        store.redact(cid, secret.event_id, reason="test")
        other = uuid.uuid4()
        store.append(
            other.hex,
            {"kind": "MessageEvent", "id": "o1", "source": "user", "llm_message": {
                "role": "user", "content": [{"type": "text", "text": "pear-0y elsewhere"}]}},
        )  # fmt: skip
        bind(cid.hex, store)
        recall = RecallExecutor(cid.hex, max_chars=3000, scope="conversation")
        expanded = recall(RecallAction(condensation=f"{condensation.event_id}-summary")).text
        for eid in forgotten:
            assert eid in expanded
        assert f"{secret.event_id}, seq {secret.seq}] (content removed)" in expanded
        searched = recall(RecallAction(query="pear elsewhere")).text
        assert "o1" not in searched and searched == "nothing forgotten matches"
        wide = RecallExecutor(cid.hex, max_chars=3000, scope="store")
        assert "nothing" in wide(RecallAction(query="pear elsewhere")).text  # o1 is live
        bad = recall(RecallAction(condensation="no-such"))
        assert bad.is_error and "no condensation" in bad.text
        small = RecallExecutor(cid.hex, max_chars=300, scope="conversation")
        assert len(small(RecallAction(condensation=condensation.event_id)).text) < 700
