"""A hypothesis state machine over the whole lifecycle: appends (plain and condensing), forks
(of forks too, at any seq), redactions, compactions and erasures, in any order. After every
step each living conversation's stored view equals a pure replay of its log, its log is exactly
what was appended to it and to the prefix it shares, every redacted event reads as redacted and
every compacted event as compacted wherever it is shared and nowhere else, verify passes,
erasing a conversation with forks is refused, and so is a fork into compacted history.

Which events a compaction takes is worked out here from pure replays: every event that entered
a view (all but condensations) and that no live view of a conversation sharing it still holds,
unless a redaction took all its content first (docs/retention.md)."""

from __future__ import annotations

import uuid
from datetime import timedelta

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

from viewstore import (
    CompactedHistoryError,
    ConversationHasForksError,
    EventStore,
    InvalidArgumentError,
)
from viewstore.domain.scrub import COMPACTED, MARK

from ..store._helpers import A, C, M, O, Payload, U, triple

SETTINGS = settings(
    max_examples=8,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def machine_for(store: EventStore) -> type[RuleBasedStateMachine]:
    class LifecycleMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.run = uuid.uuid4().hex[:8]
            # Each log holds the very payload objects of its source's prefix: a redaction of
            # one is then seen in every log that shares it.
            self.logs: dict[str, list[Payload]] = {"root": []}
            self.parent: dict[str, str] = {}
            self.fork_at: dict[str, int] = {}
            self.redacted: set[int] = set()
            self.compacted: set[int] = set()
            self.counter = 0

        def key(self, name: str) -> str:
            return f"{self.run}-{name}"

        def new_id(self, prefix: str) -> str:
            self.counter += 1
            return f"{prefix}{self.counter}"

        def names(self) -> list[str]:
            return sorted(self.logs)

        @rule(data=st.data())
        def append(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(self.names()))
            kind = data.draw(st.sampled_from(["message", "tool", "condense"]))
            log = self.logs[name]
            if kind == "message":
                batch = [U(self.new_id("u")), M(self.new_id("m"))]
            elif kind == "tool":
                tc, response = self.new_id("tc"), self.new_id("r")
                batch = [A(self.new_id("a"), tc, response), O(self.new_id("o"), tc)]
            else:
                ids = [p["id"] for p in log]
                forget = data.draw(st.lists(st.sampled_from(ids), unique=True)) if ids else []
                batch = [C(self.new_id("c"), forget, "summary", 0)]
            store.append(self.key(name), batch, expected_version=len(log))
            log.extend(batch)

        @precondition(lambda self: any(self.logs.values()))
        @rule(data=st.data())
        def fork(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from([n for n in self.names() if self.logs[n]]))
            at = data.draw(st.integers(1, len(self.logs[name])))
            new = self.new_id("f")
            held = set(store.replay(self.key(name), as_of=at).event_ids)
            shown = [p for p in self.logs[name][:at] if p["id"] in held]
            if any(id(p) in self.compacted for p in shown):
                with pytest.raises(CompactedHistoryError):
                    store.fork(self.key(name), at, self.key(new))
                return
            store.fork(self.key(name), at, self.key(new))
            self.logs[new] = self.logs[name][:at]
            # Forked inside a shared prefix: the store records the conversation holding that
            # event as the source (docs/lifecycle.md), and that one then has a fork.
            while name in self.parent and at <= self.fork_at[name]:
                name = self.parent[name]
            self.parent[new], self.fork_at[new] = name, at
            assert store.fork_origin(self.key(new)).source == self.key(name)  # type: ignore[union-attr]

        @precondition(lambda self: any(self.logs.values()))
        @rule(data=st.data())
        def redact(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from([n for n in self.names() if self.logs[n]]))
            payload = data.draw(st.sampled_from(self.logs[name]))
            if id(payload) in self.redacted | self.compacted:
                with pytest.raises(InvalidArgumentError, match="nothing left"):
                    store.redact(self.key(name), payload["id"], reason="again")
                return
            store.redact(self.key(name), payload["id"], reason="machine")
            self.redacted.add(id(payload))

        @precondition(lambda self: any(self.logs.values()))
        @rule(data=st.data())
        def compact(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from([*self.names(), None]))
            held = {
                id(p)
                for other, log in self.logs.items()
                if log
                for p in log
                if p["id"] in set(store.replay(self.key(other)).event_ids)
            }
            # A conversation's own events: those after its fork point (all of them for one
            # that is not a fork); the whole store: every log's.
            own = [
                p
                for n, log in self.logs.items()
                if name is None or n == name
                for p in log[self.fork_at.get(n, 0) :]
            ]
            expected = {
                id(p)
                for p in own
                if p["kind"] != "Condensation"
                and id(p) not in held | self.redacted | self.compacted
            }
            report = store.compact(
                None if name is None else self.key(name),
                older_than=timedelta(0),
                min_freed=-(10**6),
                batch=data.draw(st.sampled_from([1, 2, 500])),
            )
            if name is not None:  # the whole store holds earlier examples' conversations too
                assert report.events == len(expected), (report, len(expected))
            self.compacted |= expected

        @precondition(lambda self: len(self.logs) > 1)
        @rule(data=st.data())
        def erase(self, data: st.DataObject) -> None:
            name = data.draw(st.sampled_from(self.names()))
            if name in self.parent.values():
                with pytest.raises(ConversationHasForksError):
                    store.erase(self.key(name), reason="machine")
                return
            if not self.logs[name]:
                return  # never appended to: there is nothing to erase yet
            store.erase(self.key(name), reason="machine")
            del self.logs[name]
            self.parent.pop(name, None)
            self.fork_at.pop(name, None)

        @invariant()
        def every_conversation_equals_replay_and_reads_its_redactions(self) -> None:
            for name, log in self.logs.items():
                if not log:
                    continue
                key = self.key(name)
                view = store.view(key)
                assert view.version == len(log)
                assert triple(view) == triple(store.replay(key))
                stored = store.events(key)
                assert [e.event_id for e in stored] == [p["id"] for p in log]
                for event, payload in zip(stored, log, strict=True):
                    assert (MARK in event.payload_json) == (id(payload) in self.redacted), (
                        name,
                        event.event_id,
                    )
                    assert (COMPACTED in event.payload_json) == (id(payload) in self.compacted)
                assert store.verify(key).ok, store.verify(key).problems

    return LifecycleMachine


def test_forks_redactions_compactions_and_erasures_keep_every_view_equal_to_replay(
    store: EventStore, sweep_step: int
) -> None:
    # Fewer runs through the asyncio store and on the partitioned layout (tests/conftest.py).
    chosen = settings(SETTINGS, max_examples=SETTINGS.max_examples // sweep_step)
    run_state_machine_as_test(machine_for(store), settings=chosen)
    assert store.verify().ok
