"""The OpenHands SDK on viewstore against the SDK's own files (needs ``viewstore[openhands]``).

    .venv/bin/python -m benchmarks.bench_openhands --url URL [--events N] [--repeat R]

1. Resume: conversations of N events (default 20,000; about 1 KiB each), resumed through
   ``open_conversation`` vs through the SDK's ``LocalFileStore`` (a ``LocalConversation`` over
   the same events and base state, on local disk). Each side's median of R resumes,
   alternating; the target is viewstore at least 10x faster, for each shape:

   - ``messages``: messages, a condensation every 400 events keeping the first and the newest
     100: a view of a few hundred, equal to the resume view;
   - ``tools``: tool batches (two calls of one LLM response, then their results) and an orphan
     result now and then, a condensation every 400 events that cuts the batch at its border:
     a view of a few hundred from which a resume removes the cut batch and the orphan (the
     live and the resume view differ);
   - each of those again as an SDK before parent ids wrote it: no event has a parent id (the
     SDK chains each to the one before) and the base state names no HEAD.
2. Per step: ``ConversationState.append_event`` (the SDK's persistence chokepoint: the event
   file, then base_state.json with the new HEAD) through ``ViewstoreFileStore`` vs through
   ``LocalFileStore``, in alternating blocks; cost ratio of the medians (target <= 1.5 on
   SQLite).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

from openhands.sdk import Agent, LocalConversation, Message, MessageEvent, TextContent
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.event import ActionEvent, Condensation, ObservationEvent
from openhands.sdk.io import LocalFileStore
from openhands.sdk.llm import MessageToolCall
from openhands.sdk.mcp import MCPToolAction, MCPToolObservation
from openhands.sdk.testing import TestLLM
from openhands.sdk.workspace import LocalWorkspace
from sqlalchemy import text

from benchmarks.bench_store import save
from viewstore import EventStore
from viewstore.openhands import ViewstoreFileStore, open_conversation
from viewstore.openhands.sdk_internals import SDK_VERSION

TEXT = "lorem ipsum dolor sit amet " * 36  # about 1 KiB of message text


def agent() -> Agent:
    return Agent(llm=TestLLM.from_messages([]), tools=[])


def message(i: int, parent: str | None) -> MessageEvent:
    role = "user" if i % 2 else "assistant"
    return MessageEvent(
        source="user" if i % 2 else "agent",
        llm_message=Message(role=role, content=[TextContent(text=f"{i} {TEXT}")]),
        parent_id=parent,
    )


def history(count: int, every: int = 400) -> list[Any]:
    """Messages with a condensation every ``every`` events forgetting all but the first
    event and the newest 100 of the view: the view stays a few hundred long."""
    events: list[Any] = []
    view: list[str] = []
    parent = None
    for i in range(count):
        if i and i % every == 0:
            forgotten = view[1:-100]
            event: Any = Condensation(
                forgotten_event_ids=set(forgotten),
                summary=f"summary {i}",
                summary_offset=1,
                llm_response_id=f"condense-{i}",
                parent_id=parent,
            )
            view = [view[0], f"{event.id}-summary", *view[-100:]]
        else:
            event = message(i, parent)
            view.append(event.id)
        events.append(event)
        parent = event.id
    return events


def _tool_events(step: int, parent: str | None) -> list[Any]:
    """A batch: two calls of one LLM response, then their two results, chained."""
    response = f"response-{step}"
    events: list[Any] = []
    for call in (f"call-{step}-a", f"call-{step}-b"):
        events.append(
            ActionEvent(
                source="agent",
                thought=[TextContent(text=TEXT[:200])],
                action=MCPToolAction(data={"path": f"/tmp/{call}", "text": TEXT[:300]}),
                tool_name="edit",
                tool_call_id=call,
                tool_call=MessageToolCall(
                    id=call, name="edit", arguments="{}", origin="completion"
                ),
                llm_response_id=response,
                parent_id=parent,
            )
        )
        parent = events[-1].id
    for action in list(events):
        events.append(_result(action.tool_call_id, action.id, parent))
        parent = events[-1].id
    return events


def _result(call: str, action_id: str, parent: str | None) -> Any:
    return ObservationEvent(
        source="environment",
        tool_name="edit",
        tool_call_id=call,
        action_id=action_id,
        observation=MCPToolObservation.from_text(TEXT[:500], tool_name="edit"),
        parent_id=parent,
    )


def tool_history(count: int, every: int = 400) -> list[Any]:
    """Tool batches, an orphan result every 97 batches, and a condensation after about every
    ``every`` events forgetting all but the first event and the newest ~100 of the view, cut
    just after the first call of a batch: the live view keeps the batch's second call and
    both results, which a resume removes with the newest orphan."""
    events: list[Any] = [message(1, None)]
    view: list[str] = [events[0].id]
    parent: str | None = events[0].id
    step = since = 0
    while len(events) < count:
        step += 1
        batch = _tool_events(step, parent)
        if since >= every and len(view) > 110:
            # Forget up to the batch's first call, which is written first for that.
            events.append(batch[0])
            view.append(batch[0].id)
            forgotten = [*view[1:-100], batch[0].id]
            event: Any = Condensation(
                forgotten_event_ids=set(forgotten),
                summary=f"summary {step}",
                summary_offset=1,
                llm_response_id=f"condense-{step}",
                parent_id=batch[0].id,
            )
            events.append(event)
            view = [view[0], f"{event.id}-summary", *view[-100:-1]]
            batch = [
                b.model_copy(update={"parent_id": event.id}) if i == 1 else b
                for i, b in enumerate(batch)
            ][1:]
            since = 0
        if step % 97 == 0:
            batch.append(_result(f"nobody-{step}", "none", batch[-1].id))
        events.extend(batch)
        view.extend(b.id for b in batch)
        parent = batch[-1].id
        since += len(batch)
    return events[:count]


def without_parent_ids(events: list[Any]) -> list[Any]:
    """The events as an SDK before parent ids wrote them (each one's parent: the one before)."""
    return [event.model_copy(update={"parent_id": None}) for event in events]


SHAPES = {
    "messages": history,
    "tools": tool_history,
    "messages, no parent ids": lambda count: without_parent_ids(history(count)),
    "tools, no parent ids": lambda count: without_parent_ids(tool_history(count)),
}


def build(url: str, folder: Path, events: list[Any]) -> uuid.UUID:
    """The same conversation twice: an SDK folder in the SDK's layout (event files named and
    serialized as its EventLog writes them, its own base_state.json with HEAD on the last
    event), and the store, filled in batches as ``viewstore import`` fills it."""
    cid = uuid.uuid4()
    workspace = LocalWorkspace(working_dir=str(folder / "ws"))
    fs = LocalFileStore(str(folder / cid.hex))
    ConversationState.create(id=cid, agent=agent(), workspace=workspace, file_store=fs)
    (folder / cid.hex / "events").mkdir(exist_ok=True)
    for index, event in enumerate(events):
        name = f"event-{index:05d}-{event.id}.json"
        (folder / cid.hex / "events" / name).write_text(event.model_dump_json(exclude_none=True))
    base_state = json.loads(fs.read("base_state.json"))
    # A log without parent ids comes with a base state that names no HEAD, as such an SDK wrote.
    linear = any(event.parent_id is not None for event in events)
    base_state["leaf_event_id"] = events[-1].id if linear else None
    (folder / cid.hex / "base_state.json").write_text(json.dumps(base_state))
    with EventStore(url) as store:
        store.create_schema()
        for start in range(0, len(events), 500):
            store.append(cid, events[start : start + 500])
        store.save_base_state(cid, json.dumps(base_state), at_version=len(events))
        if store.engine.dialect.name == "postgresql":
            # The statistics autovacuum gathers within a minute of such a load: without them
            # the planner takes a fresh table for empty and may pick a worse index.
            with store.engine.begin() as conn:
                conn.execute(text("ANALYZE"))
    return cid


def resume_times(url: str, folder: Path, cid: uuid.UUID, repeat: int) -> dict[str, Any]:
    ws = str(folder / "ws")
    sdk, ours = [], []
    for _ in range(repeat):
        # Each side starts from a collected heap: the other side's 20,000 parsed events would
        # otherwise be traversed by whichever collection falls inside the next timing.
        conversation = None
        gc.collect()
        started = time.perf_counter()
        conversation = LocalConversation(
            agent=agent(),
            workspace=ws,
            conversation_id=cid,
            file_store=LocalFileStore(str(folder / cid.hex)),
            visualizer=None,
        )
        sdk_view = [e.id for e in conversation.state.view.events]
        sdk.append(time.perf_counter() - started)
        conversation = None
        gc.collect()
        with EventStore(url) as store:
            started = time.perf_counter()
            conversation = open_conversation(store, agent(), ws, cid, visualizer=None)
            view = [e.id for e in conversation.state.view.events]
            ours.append(time.perf_counter() - started)
        assert view == sdk_view, "the two resumes disagree"
    sdk_s, ours_s = statistics.median(sdk), statistics.median(ours)
    with EventStore(url) as store:
        live, events = len(store.view(cid).event_ids), store.version(cid)
    return {
        "events": events,
        "live_view": live,
        "view": len(view),
        "sdk_local_file_store_s": sdk_s,
        "open_conversation_s": ours_s,
        "speedup": sdk_s / ours_s,
    }


def step_times(url: str, folder: Path, blocks: int, block: int) -> dict[str, Any]:
    workspace = LocalWorkspace(working_dir=str(folder / "ws"))
    states = {}
    with EventStore(url) as store:
        for side in ("files", "viewstore"):
            cid = uuid.uuid4()
            fs: Any = (
                LocalFileStore(str(folder / cid.hex))
                if side == "files"
                else ViewstoreFileStore(store, cid)
            )
            states[side] = ConversationState.create(
                id=cid, agent=agent(), workspace=workspace, file_store=fs
            )
        costs: dict[str, list[float]] = {"files": [], "viewstore": []}
        for b in range(blocks):
            for side in ("files", "viewstore") if b % 2 else ("viewstore", "files"):
                state = states[side]
                events = [message(i, None) for i in range(block)]
                started = time.perf_counter()
                for event in events:
                    state.append_event(event)
                costs[side].append((time.perf_counter() - started) / block)
    files, ours = statistics.median(costs["files"]), statistics.median(costs["viewstore"])
    return {"local_file_store_ms": files * 1e3, "viewstore_ms": ours * 1e3, "ratio": ours / files}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        backend = EventStore(args.url).engine.dialect.name
        resume: dict[str, Any] = {}
        for shape, make in SHAPES.items():
            cid = build(args.url, folder, make(args.events))
            found = resume[shape] = resume_times(args.url, folder, cid, args.repeat)
            print(
                f"resume ({shape}) {found['events']} events (live view {found['live_view']}, "
                f"resume view {found['view']}): SDK files "
                f"{found['sdk_local_file_store_s']:.3f} s, open_conversation "
                f"{found['open_conversation_s']:.3f} s: {found['speedup']:.1f}x faster",
                flush=True,
            )
        step = step_times(args.url, folder, args.blocks, args.block)
        print(
            f"per-step persistence ({backend}): LocalFileStore {step['local_file_store_ms']:.3f}"
            f" ms, ViewstoreFileStore {step['viewstore_ms']:.3f} ms: cost ratio "
            f"{step['ratio']:.2f}",
            flush=True,
        )
    result = {"backend": backend, "sdk": SDK_VERSION, "resume": resume, "step": step}
    save(args.output, result)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
