"""A hypothesis state machine over several conversations: appends (plain and condensing),
erasures and reads in any order. After every step each surviving conversation's stored view
equals a pure replay of its log and its log is exactly what was appended; each erased one is
gone from every read, keeps its tombstone, and refuses appends."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from viewstore import ConversationErasedError, ConversationNotFoundError, EventStore

from ..store._helpers import A, C, M, O, Payload, U, triple

SETTINGS = settings(
    max_examples=8,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
NAMES = ["a", "b", "c"]


def machine_for(store: EventStore) -> type[RuleBasedStateMachine]:
    class ErasureMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.run = uuid.uuid4().hex[:8]
            self.logs: dict[str, list[Payload]] = {}
            self.erased: set[str] = set()
            self.counter = 0

        def key(self, name: str) -> str:
            return f"{self.run}-{name}"

        def new_id(self, prefix: str) -> str:
            self.counter += 1
            return f"{prefix}{self.counter}"

        @rule(name=st.sampled_from(NAMES), data=st.data())
        def append(self, name: str, data: st.DataObject) -> None:
            kind = data.draw(st.sampled_from(["message", "tool", "condense"]))
            log = self.logs.get(name, [])
            if kind == "message":
                batch = [U(self.new_id("u")), M(self.new_id("m"))]
            elif kind == "tool":
                tc, response = self.new_id("tc"), self.new_id("r")
                batch = [A(self.new_id("a"), tc, response), O(self.new_id("o"), tc)]
            else:
                ids = [p["id"] for p in log]
                forget = data.draw(st.lists(st.sampled_from(ids), unique=True)) if ids else []
                batch = [C(self.new_id("c"), forget, "summary", 0)]
            if name in self.erased:
                with pytest.raises(ConversationErasedError):
                    store.append(self.key(name), batch)
                return
            store.append(self.key(name), batch, expected_version=len(log))
            self.logs[name] = [*log, *batch]

        @precondition(lambda self: bool(self.logs))
        @rule(data=st.data())
        def erase(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(sorted(self.logs)))
            tombstone = store.erase(self.key(name), reason="machine")
            assert tombstone.events == len(self.logs.pop(name))
            self.erased.add(name)

        @invariant()
        def survivors_equal_replay_and_the_erased_are_gone(self) -> None:
            for name, log in self.logs.items():
                view = store.view(self.key(name))
                assert view.version == len(log)
                assert triple(view) == triple(store.replay(self.key(name)))
                assert [e.event_id for e in store.events(self.key(name))] == [p["id"] for p in log]
            for name in self.erased:
                with pytest.raises(ConversationNotFoundError):
                    store.view(self.key(name))
                assert store.tombstone(self.key(name)) is not None
            mine = {k for k in store.conversation_ids() if k.startswith(self.run)}
            assert mine == {self.key(name) for name in self.logs}

    return ErasureMachine


def test_erasures_among_appends_keep_every_survivor_equal_to_replay(
    store: EventStore, sweep_step: int
) -> None:
    # Fewer runs through the asyncio store and on the partitioned layout (tests/conftest.py).
    chosen = settings(SETTINGS, max_examples=SETTINGS.max_examples // sweep_step)
    run_state_machine_as_test(machine_for(store), settings=chosen)
    assert store.verify().ok
