"""What viewstore.openhands assumes about openhands-sdk 1.57 and 1.58, checked against the
real SDK installed (CI runs this once per supported release).

If an SDK upgrade changes any of these, this file fails first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from openhands.sdk import Message, MessageEvent, TextContent
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.event.conversation_state import ConversationStateUpdateEvent
from openhands.sdk.io import InMemoryFileStore

from tests.openhands._agent import make_agent
from viewstore.openhands import sdk_internals as sdk


def test_the_persistence_layout() -> None:
    assert sdk.SUPPORTED == ("1.57", "1.58")
    assert sdk.SDK_VERSION.rpartition(".")[0] in sdk.SUPPORTED
    assert (sdk.BASE_STATE, sdk.EVENTS_DIR, sdk.LOCK_FILE_NAME) == (
        "base_state.json",
        "events",
        ".eventlog.lock",
    )
    name = sdk.event_file_name(7, "5a3b1e00-0000-4000-8000-000000000001")
    assert name == "event-00007-5a3b1e00-0000-4000-8000-000000000001.json"
    match = sdk.EVENT_NAME_RE.match(name)
    assert match is not None and match.group("idx") == "00007"
    assert sdk.MARKER_RE.match(".eventlog-len-12.marker").group("n") == "12"  # type: ignore[union-attr]


def test_catch_up_moves_head_as_the_sdk_does(tmp_path: Path) -> None:
    """Replay the HEAD moves on a saved snapshot and compare with the real state's fields."""
    fs = InMemoryFileStore()
    state = ConversationState.create(
        id=uuid.uuid4(), agent=make_agent(0, "i"), workspace=_workspace(tmp_path), file_store=fs
    )
    snapshot = fs.read(sdk.BASE_STATE)
    later = [
        MessageEvent(
            source="user", llm_message=Message(role="user", content=[TextContent(text="a")])
        ),
        MessageEvent(source="agent", llm_message=Message(role="assistant", content=[])),
        ConversationStateUpdateEvent(key="execution_status", value="running"),
    ]
    for event in later:
        state.append_event(event)
        if event.source == "user":
            state.last_user_message_id = event.id  # what LocalConversation's callback does
    caught_up = json.loads(
        sdk.catch_up(snapshot, [json.loads(e.model_dump_json(exclude_none=True)) for e in later])
    )
    assert caught_up["leaf_event_id"] == state.leaf_event_id == later[1].id
    assert caught_up["last_user_message_id"] == state.last_user_message_id == later[0].id
    assert caught_up["head_is_empty"] is state.head_is_empty is False


def _workspace(tmp_path: Path):  # type: ignore[no-untyped-def]
    from openhands.sdk.workspace import LocalWorkspace  # noqa: PLC0415

    return LocalWorkspace(working_dir=str(tmp_path))
