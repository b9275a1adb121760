"""A hypothesis state machine over one conversation: whatever sequence of appends, batches,
condensations, requests, failing batches, retries and reads, the materialized rows always equal
a pure replay of the log (``store.view() == store.replay()``), as of now and as of any event.

Each example runs on a fresh conversation id in the test's own fresh database (per backend).
"""

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

from viewstore import (
    ConversationNotFoundError,
    EventStore,
    View,
    ViewstoreError,
    parse_event,
)

from ..store._helpers import A, C, E, M, O, Payload, R, U, X, dump, triple

SETTINGS = settings(
    max_examples=10,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

SUMMARY_VARIANTS = ["none", "summary-only", "offset-only", "both", "empty-summary"]
BAD_KINDS = ["invalid-event", "changed-payload", "twice-in-batch", "stale-version"]


def machine_for(store: EventStore) -> type[RuleBasedStateMachine]:
    class StoreMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.cid = f"sm-{uuid.uuid4().hex}"
            self.log: list[Payload] = []
            self.counter = 0
            self.pending: list[str] = []  # tool calls without a result yet
            self.answered: list[str] = []
            self.condensations: list[str] = []
            self.last_batch: list[Payload] = []

        # -- helpers ---------------------------------------------------------------------

        def new_id(self, prefix: str) -> str:
            self.counter += 1
            return f"{prefix}{self.counter}"

        def draw_events(self, data: st.DataObject, size: int) -> list[Payload]:
            """Plausible agent traffic: messages, tool batches, results, orphans, noise."""
            batch: list[Payload] = []
            while len(batch) < size:
                kind = data.draw(st.sampled_from(["U", "M", "batch", "result", "noise"]))
                if kind == "U":
                    batch.append(U(self.new_id("u")))
                elif kind == "M":
                    batch.append(M(self.new_id("m")))
                elif kind == "batch":
                    response = self.new_id("r")
                    thinking = data.draw(st.booleans())
                    for _ in range(data.draw(st.integers(1, 3))):
                        tc = self.new_id("tc")
                        self.pending.append(tc)
                        batch.append(A(self.new_id("a"), tc, response, thinking=thinking))
                elif kind == "result":
                    choices = ["orphan"]
                    if self.pending:
                        choices += ["pending", "pending", "pending"]
                    if self.answered:
                        choices.append("again")
                    which = data.draw(st.sampled_from(choices))
                    if which == "pending":
                        tc = data.draw(st.sampled_from(self.pending))
                        self.pending.remove(tc)
                        self.answered.append(tc)
                    elif which == "again":
                        tc = data.draw(st.sampled_from(self.answered))
                    else:
                        tc = self.new_id("ghost-tc")
                    make = data.draw(st.sampled_from([O, E]))
                    batch.append(make(self.new_id("o"), tc))
                else:
                    batch.append(X(self.new_id("x")))
            return batch

        def append(self, batch: list[Payload], expected: bool) -> None:
            version = len(self.log)
            result = store.append(self.cid, batch, expected_version=version if expected else None)
            assert result.appended == [p["id"] for p in batch]
            assert result.duplicates == []
            assert result.version == version + len(batch)
            assert result.first_seq == version + 1
            self.log.extend(batch)
            self.last_batch = batch

        # -- rules -----------------------------------------------------------------------

        @rule(data=st.data(), size=st.integers(1, 4), expected=st.booleans())
        def append_events(self, data: st.DataObject, size: int, expected: bool) -> None:
            self.append(self.draw_events(data, size), expected)

        @rule(data=st.data(), variant=st.sampled_from(SUMMARY_VARIANTS))
        def condense(self, data: st.DataObject, variant: str) -> None:
            cid = self.new_id("c")
            stored = [p["id"] for p in self.log]
            forgotten = data.draw(st.lists(st.sampled_from(stored), unique=True)) if stored else []
            extras = ["never-stored", cid + "-summary"]
            extras += [c + "-summary" for c in self.condensations]
            forgotten += data.draw(st.lists(st.sampled_from(extras), max_size=3, unique=True))
            offset = data.draw(st.integers(0, len(self.log) + 2))
            summary, summary_offset = {
                "none": (None, None),
                "summary-only": ("summary", None),
                "offset-only": (None, offset),
                "both": (f"summary of {len(forgotten)}", offset),
                "empty-summary": ("", offset),
            }[variant]
            batch = [C(cid, forgotten, summary, summary_offset)]
            if data.draw(st.booleans()):  # sometimes more traffic in the same append
                batch += self.draw_events(data, data.draw(st.integers(1, 2)))
            self.condensations.append(cid)
            self.append(batch, data.draw(st.booleans()))

        @rule()
        def request(self) -> None:
            self.append([R(self.new_id("req"))], expected=True)

        @rule(data=st.data(), bad=st.sampled_from(BAD_KINDS))
        def bad_batch(self, data: st.DataObject, bad: str) -> None:
            saved = (self.counter, list(self.pending), list(self.answered))
            batch = self.draw_events(data, data.draw(st.integers(0, 3)))
            expected: int | None = len(self.log)
            if bad == "invalid-event":
                batch.append({"id": self.new_id("bad"), "kind": "ActionEvent"})
            elif bad == "changed-payload" and self.log:
                original = data.draw(st.sampled_from(self.log))
                changed = dict(original)
                changed["tampered"] = True
                batch.insert(data.draw(st.integers(0, len(batch))), changed)
            elif bad == "twice-in-batch":
                twin = M(self.new_id("twin"))
                batch += [twin, M(twin["id"], "another text")]
            else:  # a stale or future version (an empty log has no stale one)
                batch.append(M(self.new_id("m")))
                expected = len(self.log) + 1
            before = dump(store.engine)
            with pytest.raises(ViewstoreError):
                store.append(self.cid, batch, expected_version=expected)
            assert dump(store.engine) == before
            self.counter, self.pending, self.answered = saved

        @precondition(lambda self: self.last_batch)
        @rule(expected=st.booleans())
        def retry_last_batch(self, expected: bool) -> None:
            """A worker resends its last batch (its reply was lost): nothing is written."""
            version = len(self.log)
            old = version - len(self.last_batch) if expected else None
            result = store.append(self.cid, self.last_batch, expected_version=old)
            assert result.appended == []
            assert result.duplicates == [p["id"] for p in self.last_batch]
            assert result.version == version

        @precondition(lambda self: self.log)
        @rule(data=st.data())
        def read_as_of(self, data: st.DataObject) -> None:
            seq = data.draw(st.integers(0, len(self.log)))
            stored = store.view(self.cid, as_of=seq)
            assert stored.version == seq
            assert triple(stored) == triple(store.replay(self.cid, as_of=seq))

        @precondition(lambda self: self.log)
        @rule()
        def resume(self) -> None:
            expected = View.from_events([parse_event(p) for p in self.log])
            resumed = store.resume_view(self.cid)
            assert resumed.event_ids == [e.id for e in expected.events]
            assert resumed.manipulation_indices == sorted(expected.manipulation_indices)
            assert resumed.unhandled_condensation_request == expected.unhandled_condensation_request

        @precondition(lambda self: self.log)
        @rule()
        def verify(self) -> None:
            report = store.verify(self.cid)
            assert report.ok, report.render()

        # -- after every step ------------------------------------------------------------

        @invariant()
        def rows_equal_replay(self) -> None:
            if not self.log:
                with pytest.raises(ConversationNotFoundError):
                    store.view(self.cid)
                return
            view = store.view(self.cid)
            assert view.version == len(self.log)
            assert triple(view) == triple(store.replay(self.cid))

        def teardown(self) -> None:
            if self.log:
                assert [e.payload for e in store.events(self.cid)] == self.log

    return StoreMachine


def test_rows_equal_replay_after_every_step(store: EventStore, sweep_step: int) -> None:
    # Fewer runs through the asyncio store and on the partitioned layout (tests/conftest.py).
    chosen = settings(SETTINGS, max_examples=SETTINGS.max_examples // sweep_step)
    run_state_machine_as_test(machine_for(store), settings=chosen)
    assert store.verify().ok
