"""A base state the file store leaves unwritten (the log implies it) reads back as the SDK
wrote it: driven side by side with the SDK's own ``LocalFileStore`` through random steps. And
what that buys: on PostgreSQL such a step sends the server one statement, the append."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from openhands.sdk import Agent, Message, MessageEvent, TextContent
from openhands.sdk.conversation.state import ConversationExecutionStatus, ConversationState
from openhands.sdk.event.conversation_state import ConversationStateUpdateEvent
from openhands.sdk.io import LocalFileStore
from openhands.sdk.testing import TestLLM
from openhands.sdk.workspace import LocalWorkspace
from sqlalchemy import event as sa_event

import viewstore
from viewstore import EventStore
from viewstore.importers.export import stored_base_state
from viewstore.openhands import ViewstoreFileStore
from viewstore.openhands.file_store import MAX_LAG

STATUSES = list(ConversationExecutionStatus)


def _message(rng: random.Random) -> MessageEvent:
    user = rng.random() < 0.4
    return MessageEvent(
        source="user" if user else "agent",
        llm_message=Message(
            role="user" if user else "assistant", content=[TextContent(text=str(rng.random()))]
        ),
    )


def _step(rng: random.Random, states: list[ConversationState]) -> None:
    """One of the ways the SDK changes a state, done the same way to every state."""
    choice = rng.random()
    if choice < 0.5:  # an event outside a `with`: the event, then the base state
        event = _message(rng)
        for state in states:
            state.append_event(event)
    elif choice < 0.65:  # a state update event: no HEAD move, no base state
        update = ConversationStateUpdateEvent(key="stats", value=rng.random())
        for state in states:
            state.append_event(update)
    elif choice < 0.85:  # a step: several events and a field, one base state at the end
        events = [_message(rng) for _ in range(rng.randint(1, 4))]
        status = rng.choice(STATUSES) if rng.random() < 0.5 else None
        for state in states:
            with state:
                for event in events:
                    state.append_event(event)
                if status is not None:
                    state.execution_status = status
    else:  # a field alone
        status = rng.choice(STATUSES)
        for state in states:
            state.execution_status = status


@pytest.mark.parametrize("seed", range(4))
def test_base_state_reads_back_as_the_sdk_wrote_it(db_url: str, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    cid = uuid.uuid4()
    workspace = LocalWorkspace(working_dir=str(tmp_path / "ws"))
    agent = Agent(llm=TestLLM.from_messages([]), tools=[])
    files = LocalFileStore(str(tmp_path / cid.hex))
    with EventStore(db_url) as store:
        store.create_schema()
        ours = ViewstoreFileStore(store, cid)
        states = [
            ConversationState.create(id=cid, agent=agent, workspace=workspace, file_store=fs)
            for fs in (files, ours)
        ]
        skipped = 0
        for _ in range(120):
            before = store.base_state(cid)
            _step(rng, states)
            after = store.base_state(cid)
            assert after is not None
            skipped += before is not None and after.revision == before.revision
            expected = json.loads(files.read("base_state.json"))
            read = json.loads(ViewstoreFileStore(store, cid).read("base_state.json"))
            assert read == expected
            assert after.behind <= MAX_LAG
            log = store.events(cid) if after.version else []
            exported = stored_base_state(cid.hex, log, after.payload, after.at_version)
            assert exported == expected
        assert skipped > 10  # the point of it: most steps wrote no base state


def test_a_lagging_base_state_is_written_every_max_lag_events(db_url: str, tmp_path: Path) -> None:
    cid = uuid.uuid4()
    agent = Agent(llm=TestLLM.from_messages([]), tools=[])
    with EventStore(db_url) as store:
        store.create_schema()
        state = ConversationState.create(
            id=cid,
            agent=agent,
            workspace=LocalWorkspace(working_dir=str(tmp_path)),
            file_store=ViewstoreFileStore(store, cid),
        )
        lags: list[int] = []
        for i in range(3 * MAX_LAG):
            event: Any = MessageEvent(
                source="agent",
                llm_message=Message(role="assistant", content=[TextContent(text=str(i))]),
            )
            state.append_event(event)
            found = store.base_state(cid)
            assert found is not None
            lags.append(found.behind)
        assert max(lags) == MAX_LAG
        assert lags.count(0) == len(lags) // (MAX_LAG + 1)  # rewritten every MAX_LAG + 1


class _Recording(psycopg.Cursor[Any]):
    sent: ClassVar[list[str]] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        _Recording.sent.append(str(query))
        return super().execute(query, params, **kwargs)


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_step_whose_base_state_the_log_implies_is_one_statement(
    db_url: str, tmp_path: Path
) -> None:
    """What docs/tutorial-openhands.md says of a step on PostgreSQL: the append, one call;
    nothing else reaches the server (no lock, no base-state write)."""
    engine = viewstore.create_engine(db_url)

    @sa_event.listens_for(engine, "connect")
    def _record(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.cursor_factory = _Recording

    cid = uuid.uuid4()
    with EventStore(engine) as store:
        store.create_schema()
        state = ConversationState.create(
            id=cid,
            agent=Agent(llm=TestLLM.from_messages([]), tools=[]),
            workspace=LocalWorkspace(working_dir=str(tmp_path)),
            file_store=ViewstoreFileStore(store, cid),
        )
        counts = []
        for i in range(12):
            event: Any = MessageEvent(
                source="agent",
                llm_message=Message(role="assistant", content=[TextContent(text=str(i))]),
            )
            _Recording.sent = []
            state.append_event(event)
            counts.append(len(_Recording.sent))
        assert counts[2:] == [1] * 10, counts  # after the first appends set the tail up
        assert "viewstore_append_rows" in _Recording.sent[0]
    engine.dispose()
