"""A fork of an OpenHands conversation is an OpenHands conversation: the SDK opens it through
``open_conversation`` with the shared prefix as its history, runs an agent on it, and the
store's view follows the SDK's after every event."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from tests.openhands._agent import make_agent, sdk_view, store_view
from viewstore import EventStore
from viewstore.openhands import open_conversation


def test_a_fork_opens_in_the_sdk_and_runs_on(db_url: str, tmp_path: Path) -> None:
    source = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        first = open_conversation(
            store, make_agent(6, "a"), tmp_path / "a", source, visualizer=None
        )
        first.send_message("Start.")
        first.run()
        at = store.version(source) // 2
        shared = [e.event_id for e in store.events(source)][:at]
        fork = uuid.UUID(store.fork(source, at))
    with EventStore(db_url) as store:
        holder: dict[str, Any] = {}

        def compare(_: Any) -> None:
            if "c" in holder:
                assert sdk_view(holder["c"]) == store_view(store, fork)

        again = open_conversation(
            store, make_agent(3, "b"), tmp_path / "b", fork, visualizer=None, callbacks=[compare]
        )
        assert [event.id for event in again.state.events] == shared
        assert sdk_view(again) == store_view(store, fork)
        holder["c"] = again
        again.send_message("Try again from here.")
        again.run()
        assert sdk_view(again) == store_view(store, fork)
        assert store.version(fork) > at
        assert [e.event_id for e in store.events(fork)][:at] == shared
        assert store.verify().ok
