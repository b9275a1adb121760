"""Masking through the SDK adapter (docs/masking.md): a real agent whose tool calls and outputs
carry a token runs on a store with masking rules; no stored event holds the token, each one
that did has its record, the SDK resumes the masked conversation (its view the store's) and
runs on."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from tests.openhands._agent import make_agent, sdk_view, store_view
from viewstore import EventStore, MaskingRules
from viewstore.openhands import open_conversation

TOKEN = "ghp_" + "Q7" * 18
RULES = MaskingRules.from_toml('use = ["common"]')


def test_a_conversation_run_on_a_masking_store_never_stores_the_token(
    db_url: str, tmp_path: Path
) -> None:
    cid = uuid.uuid4()
    with EventStore(db_url, masking=RULES) as store:
        store.create_schema()
        # The tag is in every tool call's arguments, every action and every tool output.
        conversation = open_conversation(
            store, make_agent(5, TOKEN), tmp_path / "ws", cid, visualizer=None
        )
        conversation.send_message(f"Start, with {TOKEN}.")
        conversation.run()
        stored = store.events(cid)
        assert not [e.seq for e in stored if TOKEN in e.payload_json]
        records = store.masks(cid)
        masked = {r.event_id for r in records}
        kinds = {e.kind for e in stored if e.event_id in masked}
        assert {"MessageEvent", "ActionEvent", "ObservationEvent"} <= kinds
        paths = {m.path for r in records for m in r.masked}
        assert "/tool_call/arguments" in paths and "/action/line" in paths
        assert store.verify().ok
        before = store_view(store, cid)
    with EventStore(db_url, masking=RULES) as store:
        resumed = open_conversation(
            store, make_agent(2, "b"), tmp_path / "ws", cid, visualizer=None
        )
        assert sdk_view(resumed) == store_view(store, cid) == before
        first = next(e for e in resumed.state.events if type(e).__name__ == "MessageEvent")
        assert "[masked:github-token]" in first.model_dump_json()
        resumed.send_message(f"Go on; the token was {TOKEN}.")
        resumed.run()
        assert sdk_view(resumed) == store_view(store, cid)
        assert not [e.seq for e in store.events(cid) if TOKEN in e.payload_json]
        assert store.verify(cid).ok
