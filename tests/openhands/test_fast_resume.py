"""Resume at the cost of the view: where the log is one branch, ``open_conversation`` hands the
SDK the resume view and its indices computed from the stored rows, without reading the log's
payloads, whether or not it equals the live view (tests/openhands/test_resume_from_rows.py
compares it with the SDK's own resume from files on every stream)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from openhands.sdk.event import ObservationEvent
from openhands.sdk.mcp import MCPToolObservation
from sqlalchemy import event as sa_event

from tests.openhands._agent import make_agent, sdk_view, store_view
from viewstore import EventStore
from viewstore.openhands import open_conversation
from viewstore.openhands.sdk_internals import StoredIndicesView


def run_conversation(url: str, workspace: Path, cid: uuid.UUID) -> None:
    with EventStore(url) as store:
        store.create_schema()
        conversation = open_conversation(
            store, make_agent(10, "a"), workspace, cid, visualizer=None
        )
        conversation.send_message("Start.")
        conversation.run()


def payload_reads(store: EventStore) -> list[str]:
    statements: list[str] = []
    sa_event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    return statements


def test_resume_serves_the_stored_view(db_url: str, tmp_path: Path) -> None:
    cid = uuid.uuid4()
    run_conversation(db_url, tmp_path / "ws", cid)
    store = EventStore(db_url)
    statements = payload_reads(store)
    holder: dict[str, Any] = {}

    def compare(_: Any) -> None:
        if "c" in holder:
            assert sdk_view(holder["c"]) == store_view(store, cid)

    conversation = open_conversation(
        store, make_agent(4, "b"), tmp_path / "ws", cid, visualizer=None, callbacks=[compare]
    )
    assert isinstance(conversation.state.view, StoredIndicesView)
    assert not [s for s in statements if "events.payload" in s]  # no event was read
    assert sdk_view(conversation) == store_view(store, cid)
    holder["c"] = conversation
    conversation.send_message("Go on.")  # appends, condensations: the SDK takes over
    conversation.run()
    assert sdk_view(conversation) == store_view(store, cid)
    assert store.verify().ok
    store.close()


def test_resume_serves_the_resume_view_where_it_differs_from_the_live_view(
    db_url: str, tmp_path: Path
) -> None:
    cid = uuid.uuid4()
    run_conversation(db_url, tmp_path / "ws", cid)
    store = EventStore(db_url)
    last = store.events(cid)[-1]
    orphan = ObservationEvent(  # answers a call nobody made: live view only
        source="environment",
        tool_name="append_line",
        tool_call_id="call-nobody",
        action_id=last.event_id,
        observation=MCPToolObservation.from_text("?", tool_name="append_line"),
        parent_id=last.event_id,
    )
    store.append(cid, orphan, expected_version=store.version(cid))
    assert not store.live_equals_resume(cid)
    statements = payload_reads(store)
    conversation = open_conversation(
        store, make_agent(1, "b"), tmp_path / "ws", cid, visualizer=None
    )
    assert isinstance(conversation.state.view, StoredIndicesView)
    resumed = sdk_view(conversation)["event_ids"]
    assert resumed == store.resume_view(cid).event_ids
    assert orphan.id in store.view(cid).event_ids and orphan.id not in resumed
    # The base state trails the log by the orphan: its catch-up reads that one payload.
    assert len([s for s in statements if "events.payload" in s]) <= 1
    store.close()
