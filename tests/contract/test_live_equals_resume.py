"""``resume_view()`` and ``live_equals_resume``, computed from the view rows and the stretch of
the log around the view's tool events, answer what a full resume answers (``View.from_events``
over every event of the log, parsed and enforced against): on every reference vector and on
random streams (cut batches, orphan, duplicate and late observations, condensations inside
tool loops), after every event, on forks too."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.view._helpers import A, C, M, O, S, U, X
from tests.view.test_hypothesis import streams
from viewstore import EventStore
from viewstore.domain.events import Event
from viewstore.domain.view import View

#: The health checks do not apply: one store serves every example (a function-scoped fixture).
ANY = list(HealthCheck)


#: The full resume of a log, by its payloads: the same vector prefixes recur on every backend
#: and flavour of a worker, and replaying them is pure (it is most of the SQLite runs' time).
_FULL_RESUMES: dict[bytes, tuple[list[str], list[int], bool]] = {}


def _full_resume(payloads: list[str]) -> tuple[list[str], list[int], bool]:
    key = hashlib.sha256("\0".join(payloads).encode()).digest()
    if key not in _FULL_RESUMES:
        full = View.from_events(payloads)
        _FULL_RESUMES[key] = (
            [event.payload_json for event in full.events],
            sorted(full.manipulation_indices),
            full.unhandled_condensation_request,
        )
    return _FULL_RESUMES[key]


def _agrees(store: EventStore, conversation: str) -> bool:
    expected = _full_resume([event.payload_json for event in store.events(conversation)])
    resume = store.resume_view(conversation)
    got = (resume.payloads, resume.manipulation_indices, resume.unhandled_condensation_request)
    assert got == expected, (conversation, resume.version)
    live = store.view(conversation)
    same = (live.payloads, live.manipulation_indices) == expected[:2]
    assert store.live_equals_resume(conversation) is same, (conversation, live.version)
    return same


def test_agrees_with_a_full_resume_on_every_vector(
    store: EventStore, vectors_dir: Path, sweep_step: int
) -> None:
    """After every event of cases of up to 5 events; at 5 points of the longer ones (a full resume
    after each of 2,000 events would take minutes; the random streams below check after every
    event)."""
    seen = {True: 0, False: 0}
    cases = sorted((vectors_dir / "cases").glob("*.jsonl"))
    every = [*cases, *sorted((vectors_dir / "micro").glob("*.jsonl"))]
    for case in every[::sweep_step]:
        lines = case.read_text().splitlines()
        step = max(1, len(lines) // 5)
        for start in range(0, len(lines), step):
            batch = [json.loads(line) for line in lines[start : start + step]]
            store.append(case.stem, batch)
            seen[_agrees(store, case.stem)] += 1
    assert seen[True] and seen[False]  # the vectors exercise both answers


def test_agrees_with_a_full_resume_on_random_streams(store: EventStore, sweep_step: int) -> None:
    # The examples are drawn inside the test so that their number can follow sweep_step.
    @settings(max_examples=30 // sweep_step, deadline=None, suppress_health_check=ANY)
    @given(stream=streams(max_steps=25))
    def agrees(stream: list[Event]) -> None:
        conversation = f"random-{uuid.uuid4().hex}"
        for event in stream:
            store.append(conversation, event.payload_json)
            _agrees(store, conversation)

    agrees()


def test_a_batch_split_by_another_event_and_half_forgotten(store: EventStore) -> None:
    """A batch whose actions a non-LLM event separates, one of them forgotten: only the
    batch rule tells the views apart, and the action it removes lies outside the stretch of
    the log around the view's tool events."""
    stream = [
        S("s"),
        U("u"),
        A("a1", "t1", "r1"),
        X("x"),
        A("a2", "t2", "r1"),
        O("o1", "t1"),
        O("o2", "t2"),
        M("m"),
        C("c", forget=["a1", "o1"]),
    ]
    for event in stream:
        store.append("split-batch", event.payload_json)
    assert _agrees(store, "split-batch") is False
    assert "a2" in store.view("split-batch").event_ids


def test_agrees_on_forks_of_random_streams(store: EventStore, sweep_step: int) -> None:
    """A fork keeps no row of what left its view inside the shared prefix: the check reads
    those from its sources' parts of the lineage. Fork anywhere, continue with the rest of the
    stream (or of another fork), and the answer is still the full resume's."""

    @settings(max_examples=20 // sweep_step, deadline=None, suppress_health_check=ANY)
    @given(stream=streams(max_steps=25), data=st.data())
    def agrees(stream: list[Event], data: st.DataObject) -> None:
        if len(stream) < 2:
            return
        source = f"random-{uuid.uuid4().hex}"
        for event in stream:
            store.append(source, event.payload_json)
        fork = store.fork(source, data.draw(st.integers(1, len(stream) - 1)))
        for event in stream[store.version(fork) :]:
            store.append(fork, event.payload_json)
            _agrees(store, fork)
        deeper = store.fork(fork, data.draw(st.integers(1, store.version(fork))))
        for event in stream[store.version(deeper) :]:
            store.append(deeper, event.payload_json)
            _agrees(store, deeper)

    agrees()
