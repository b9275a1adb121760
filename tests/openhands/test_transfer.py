"""``viewstore import`` / ``export`` carry base_state.json: an SDK folder imported resumes
through ``open_conversation``, an exported folder resumes in the SDK's own LocalFileStore,
with the same view either way."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from openhands.sdk import LocalConversation
from openhands.sdk.io import LocalFileStore

from tests.cli._helpers import invoke
from tests.openhands._agent import make_agent, sdk_view, store_view
from tests.openhands._checks import assert_linear
from viewstore import EventStore
from viewstore.openhands import open_conversation


def test_sdk_folder_imported_resumes_through_open_conversation(db_url: str, tmp_path: Path) -> None:
    cid = uuid.uuid4()
    folder = tmp_path / "sdk" / cid.hex
    workspace = tmp_path / "ws"
    original = LocalConversation(
        agent=make_agent(6, "sdk"),
        workspace=workspace,
        conversation_id=cid,
        file_store=LocalFileStore(str(folder)),
        visualizer=None,
    )
    original.send_message("Start.")
    original.run()
    expected = sdk_view(original)
    original.close()

    store = EventStore(db_url)
    store.create_schema()
    result = invoke(db_url, "import", str(tmp_path / "sdk"), "--json")
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["conversations"]
    assert entry["base_state"] is True and entry["appended"] == store.version(cid)
    kept = store.base_state(cid)
    assert kept is not None
    assert json.loads(kept.payload) == json.loads((folder / "base_state.json").read_text())

    resumed = open_conversation(store, make_agent(2, "vs"), workspace, cid, visualizer=None)
    assert sdk_view(resumed) == expected == store_view(store, cid)
    resumed.send_message("Go on.")
    resumed.run()
    assert sdk_view(resumed) == store_view(store, cid)
    assert_linear(store, cid)
    assert store.verify().ok
    # The folder is older than the store now: importing it again changes nothing.
    version, revision = store.version(cid), kept.revision
    again = json.loads(invoke(db_url, "import", str(tmp_path / "sdk"), "--json").stdout)
    assert again["conversations"][0]["appended"] == 0
    assert store.version(cid) == version
    assert store.base_state(cid).revision > revision  # type: ignore[union-attr]  # the resume's
    store.close()


def test_exported_folder_resumes_in_the_sdk_local_file_store(db_url: str, tmp_path: Path) -> None:
    cid = uuid.uuid4()
    workspace = tmp_path / "ws"
    store = EventStore(db_url)
    store.create_schema()
    conversation = open_conversation(store, make_agent(6, "vs"), workspace, cid, visualizer=None)
    conversation.send_message("Start.")
    conversation.run()
    expected = store_view(store, cid)

    result = invoke(db_url, "export", str(cid), str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / cid.hex
    state = json.loads((folder / "base_state.json").read_text())
    assert state["agent"]["kind"] == "Agent"  # the SDK's whole base state, not a minimal one
    resumed = LocalConversation(
        agent=make_agent(2, "sdk"),
        workspace=workspace,
        conversation_id=cid,
        file_store=LocalFileStore(str(folder)),
        visualizer=None,
    )
    assert sdk_view(resumed) == expected
    resumed.send_message("Go on.")
    resumed.run()
    events = sorted((folder / "events").glob("event-*.json"))
    assert len(events) > store.version(cid)
    store.close()
