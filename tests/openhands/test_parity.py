"""A real OpenHands conversation persisting into the store: after every event the stored live
view (ids, manipulation indices, request flag) equals the SDK's own ``state.view``.

The scripted agent calls tools in parallel, thinks before calling (a thinking tool loop),
changes a file, and its summarizing condenser (``max_size=8``) condenses every few steps;
``conversation.condense()`` forces one more at the end.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from tests.openhands._agent import OUTPUT, expected_lines, make_agent, sdk_view, store_view
from tests.openhands._checks import assert_linear
from viewstore import EventStore
from viewstore.openhands import open_conversation


def test_store_view_equals_sdk_view_after_every_event(db_url: str, tmp_path: Path) -> None:
    store = EventStore(db_url)
    store.create_schema()
    cid = uuid.uuid4()
    holder: dict[str, Any] = {}
    checked: list[str] = []

    def compare(event: Any) -> None:  # runs after the SDK persisted the event
        conversation = holder.get("conversation")
        if conversation is None:
            return
        assert store_view(store, cid) == sdk_view(conversation), type(event).__name__
        checked.append(type(event).__name__)

    conversation = open_conversation(
        store, make_agent(9, "p"), tmp_path / "ws", cid, visualizer=None, callbacks=[compare]
    )
    holder["conversation"] = conversation
    conversation.send_message("Write the notes.")
    conversation.run()
    conversation.condense()

    kinds = [event.kind for event in store.events(cid)]
    assert len(checked) == len(kinds) == store.version(cid)
    assert kinds.count("Condensation") >= 3  # two from the condenser, one forced
    assert kinds[-2:] == ["CondensationRequest", "Condensation"]  # condense()
    assert store_view(store, cid) == sdk_view(conversation)
    # The tool really ran, once per call: 3 parallel pairs + 6 single calls.
    lines = (tmp_path / "ws" / OUTPUT).read_text().split()
    assert lines == expected_lines(9, "p")
    thinking = [e.payload for e in store.events(cid) if e.payload.get("thinking_blocks")]
    assert len(thinking) == 3
    assert_linear(store, cid)
    assert store.verify().ok
    # Every event is stored exactly as the SDK serializes it.
    for stored, event in zip(store.events(cid), conversation.state.events, strict=True):
        assert stored.payload == event.model_dump(mode="json", exclude_none=True)
    store.close()
