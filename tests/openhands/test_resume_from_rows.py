"""The SDK resumed from the store gets, from the stored rows, the view it computes itself from
its own files: on every reference stream (those where the live and the resume view differ
included), and on random streams built to make them differ.

Each stream is written twice, as the SDK's folder (``LocalFileStore``) and into the store,
chained into one branch and with HEAD on its last event; then ``ConversationState.create``
resumes each. The SDK's resume from files parses and enforces every event; the store's hands it
the view and the indices computed from rows (``EventStore.resume_view``).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from hypothesis import HealthCheck, given, settings
from openhands.sdk import Agent
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.event import Event as SdkEvent
from openhands.sdk.io import LocalFileStore
from openhands.sdk.testing import TestLLM
from openhands.sdk.workspace import LocalWorkspace

from tests.openhands.test_sdk_vectors import STREAMS
from tests.view.test_hypothesis import NON_LLM_KINDS, streams
from viewstore import EventStore
from viewstore.domain.events import Event
from viewstore.openhands import ViewstoreFileStore
from viewstore.openhands.sdk_internals import STATE_UPDATE_KIND, StoredIndicesView

_AGENT = Agent(llm=TestLLM.from_messages([]), tools=[])
_HELPER_ID = re.compile(r'"(e\d{3,})(-summary)?"')


def _sdk_text(text: str) -> str:
    """A generated event as the SDK without openhands-tools parses it: the terminal tool's
    action and observation as MCP ones, a condensation with the LLM response the SDK asks
    for, other non-LLM kinds as a pause (the same facts for every view rule: an event that is
    neither a tool event nor a state update)."""
    event = json.loads(text)
    if event["kind"] == "ActionEvent":
        event["action"] = {"data": {"command": "ls"}, "kind": "MCPToolAction"}
    elif event["kind"] == "ObservationEvent":
        event["observation"].update(kind="MCPToolObservation", tool_name="terminal")
    elif event["kind"] == "Condensation":
        event.setdefault("llm_response_id", f"condense-{event['id']}")
    elif event["kind"] in NON_LLM_KINDS:
        event = {"id": event["id"], "source": "user", "kind": "PauseEvent"}
    return json.dumps(event)


def _uuid_for(match: re.Match[str]) -> str:
    return f'"{uuid.uuid5(uuid.NAMESPACE_URL, match.group(1))}{match.group(2) or ""}"'


def _chained(lines: list[str]) -> list[SdkEvent]:
    """The events as one branch: each one's parent the tree node before it."""
    events, parent = [], None
    for line in lines:
        event = SdkEvent.model_validate_json(line).model_copy(update={"parent_id": parent})
        events.append(event)
        if event.kind != STATE_UPDATE_KIND:
            parent = event.id
    return events


def _legacy(lines: list[str]) -> list[SdkEvent]:
    """The events as an SDK before parent ids wrote them: none has a parent id, so each one's
    parent is the event before it (state updates included) and HEAD the last tree node."""
    return [
        SdkEvent.model_validate_json(line).model_copy(update={"parent_id": None}) for line in lines
    ]


def _view(state: ConversationState) -> tuple[list[str], list[int], bool]:
    view = state.view
    ids = [event.id for event in view.events]
    return ids, sorted(view.manipulation_indices), view.unhandled_condensation_request


def _both_resumes(
    store: EventStore, folder: Path, events: list[SdkEvent], *, legacy: bool = False
) -> tuple[tuple[Any, ...], tuple[Any, ...], bool]:
    cid = uuid.uuid4()
    workspace = LocalWorkspace(working_dir=str(folder / "ws"))
    files = LocalFileStore(str(folder / cid.hex))
    ConversationState.create(id=cid, agent=_AGENT, workspace=workspace, file_store=files)
    texts = [event.model_dump_json(exclude_none=True) for event in events]
    for index, (event, text) in enumerate(zip(events, texts, strict=True)):
        files.write(f"events/event-{index:05d}-{event.id}.json", text)
    state = json.loads(files.read("base_state.json"))
    leaf = next((e.id for e in reversed(events) if e.kind != STATE_UPDATE_KIND), None)
    if legacy:  # such a base state names no HEAD: the SDK takes the last tree node
        state.update(leaf_event_id=None, head_is_empty=False)
    else:
        state.update(leaf_event_id=leaf, head_is_empty=leaf is None)
    files.write("base_state.json", json.dumps(state))
    for start in range(0, len(texts), 500):
        store.append(cid, texts[start : start + 500])
    store.save_base_state(cid, json.dumps(state), at_version=len(texts))

    from_files = ConversationState.create(
        id=cid, agent=_AGENT, workspace=workspace, file_store=LocalFileStore(str(folder / cid.hex))
    )
    from_rows = ConversationState.create(
        id=cid, agent=_AGENT, workspace=workspace, file_store=ViewstoreFileStore(store, cid)
    )
    served = isinstance(from_rows.view, StoredIndicesView)
    return _view(from_files), _view(from_rows), served


@pytest.fixture
def store(db_url: str) -> Any:
    with EventStore(db_url) as store:
        store.create_schema()
        yield store


@pytest.mark.parametrize("legacy", [False, True], ids=["parent-ids", "no-parent-ids"])
@pytest.mark.parametrize("stream", STREAMS, ids=[p.stem for p in STREAMS])
def test_the_resume_from_rows_is_the_sdks_resume_from_files(
    store: EventStore, tmp_path: Path, stream: Path, legacy: bool
) -> None:
    lines = [line for line in stream.read_text(encoding="utf-8").splitlines() if line.strip()]
    events = _legacy(lines) if legacy else _chained(lines)
    files, rows, served = _both_resumes(store, tmp_path, events, legacy=legacy)
    # From the rows, not rebuilt by the SDK (no log: nothing). A log without parent ids whose
    # last events are state updates or errors (off the SDK's branch) is folded by the SDK.
    kinds = [event.kind for event in events]
    assert (
        served
        or not lines
        or (legacy and kinds[-1] in (STATE_UPDATE_KIND, "ConversationErrorEvent"))
    )
    assert rows == files


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(stream=streams(max_steps=25))
def test_the_resume_from_rows_on_random_streams(
    store: EventStore, tmp_path_factory: pytest.TempPathFactory, stream: list[Event]
) -> None:
    if not stream:
        return
    # The SDK lists only event files whose id is hex: the generated ids (e001, its summary
    # e001-summary) become UUIDs, wherever they are named.
    texts = [_sdk_text(_HELPER_ID.sub(_uuid_for, event.payload_json)) for event in stream]
    for legacy in (False, True):
        events = _legacy(texts) if legacy else _chained(texts)
        folder = tmp_path_factory.mktemp("s")
        files, rows, served = _both_resumes(store, folder, events, legacy=legacy)
        # Not served, and folded by the SDK: a log of state updates only (no HEAD), and one
        # without parent ids that ends with one (off the SDK's branch).
        nothing_but_updates = all(event.kind == STATE_UPDATE_KIND for event in events)
        ends_off_branch = legacy and events[-1].kind == STATE_UPDATE_KIND
        # Chained, a log that starts with state updates has them without a parent: the SDK
        # takes the event before as the parent of what has none, so they are on its branch,
        # while the updates after the first event hang off it. A branch with some state
        # updates and not others is the SDK's to fold (viewstore/openhands/file_store.py,
        # _branch_is_the_log).
        kinds = [event.kind for event in events]
        first = next((i for i, kind in enumerate(kinds) if kind != STATE_UPDATE_KIND), 0)
        mixed = not legacy and first > 0 and STATE_UPDATE_KIND in kinds[first:]
        assert served or nothing_but_updates or ends_off_branch or mixed
        assert rows == files


def test_the_streams_include_many_where_the_live_and_the_resume_view_differ() -> None:
    """What the test above covers: streams where a resume removes something (cut batches,
    orphan and duplicate observations, calls without results, split tool loops)."""
    differ = 0
    for stream in STREAMS:
        expected = json.loads(
            stream.with_name(stream.name.replace(".jsonl", ".expected.json")).read_text()
        )
        differ += expected["incremental"]["view_ids"] != expected["view_ids"]
    assert differ >= 50, differ  # 67 of the streams held here
