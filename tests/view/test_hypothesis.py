"""Property-based tests: random streams of realistic shape against the engine's invariants.

The streams look like OpenHands conversations (messages, batches of tool calls with a shared
``llm_response_id``, thinking on the first action, observations, agent errors and rejections,
non-LLM events, requests, condensations), damaged the ways real streams get damaged:
observations missing, duplicated, reordered, late, orphaned; tool-call ids reused; and
condensations that forget random existing, non-existent, future, non-LLM or summary ids with
every summary/offset variant, including ones that cut through batches, pairs and loops. Some
condensations are made like the real condenser (docs/semantics.md §11), from the live indices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from viewstore.domain.events import Event, parse_event
from viewstore.domain.view import (
    IndexTracker,
    TrackerState,
    View,
    enforce_properties,
    full_indices,
)
from viewstore.domain.view.properties import ALL_PROPERTIES

from ._helpers import A, C, E, J, M, O, R, S, U, X, ids

NON_LLM_KINDS = [
    "PauseEvent",
    "InterruptEvent",
    "TokenEvent",
    "HookExecutionEvent",
    "SecurityAnalysisEvent",
    "ConversationErrorEvent",
]

SETTINGS = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class _Builder:
    """Mutable bookkeeping while a stream is drawn."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.view = View()  # the live view, for condensations made like the real condenser
        self.count = 0
        self.responses = 0
        self.tool_calls: list[str] = []
        self.late: list[str] = []  # tool calls whose observation has not arrived yet
        self.summary_ids: list[str] = []

    def new_id(self) -> str:
        self.count += 1
        return f"e{self.count:03d}"

    def add(self, event: Event) -> None:
        self.events.append(event)
        self.view.append_event(event)


def _observation(draw: Any, b: _Builder, tc: str) -> Event:
    maker = draw(st.sampled_from([O, O, O, E, J]))
    return maker(b.new_id(), tc)  # type: ignore[no-any-return]


def _batch(draw: Any, b: _Builder) -> None:
    b.responses += 1
    response = f"resp_{b.responses}"
    size = draw(st.integers(1, 4))
    thinking = draw(st.booleans())
    calls: list[str] = []
    for position in range(size):
        if b.tool_calls and draw(st.integers(0, 9)) == 0:
            tc = draw(st.sampled_from(b.tool_calls))  # a reused tool-call id
        else:
            tc = f"call_{len(b.tool_calls)}"
            b.tool_calls.append(tc)
        calls.append(tc)
        b.add(A(b.new_id(), tc, response, thinking=thinking and position == 0))
    fate = draw(
        st.lists(
            st.sampled_from(["ok", "ok", "ok", "ok", "missing", "dup", "late"]),
            min_size=size,
            max_size=size,
        )
    )
    answered = [tc for tc, f in zip(calls, fate, strict=True) if f in ("ok", "dup")]
    answered += [tc for tc, f in zip(calls, fate, strict=True) if f == "dup"]
    b.late += [tc for tc, f in zip(calls, fate, strict=True) if f == "late"]
    for tc in draw(st.permutations(answered)):
        b.add(_observation(draw, b, tc))
        if draw(st.integers(0, 7)) == 0:
            b.add(X(b.new_id()))  # a state update between the steps of a loop


def _condensation(draw: Any, b: _Builder) -> None:
    cid = b.new_id()
    known = [e.id for e in b.events] + b.summary_ids
    forgotten: list[str] = []
    if known:
        forgotten += draw(st.lists(st.sampled_from(known), max_size=6))
    if draw(st.integers(0, 3)) == 0:
        forgotten.append(draw(st.sampled_from(["nope", f"e{b.count + 1:03d}", f"{cid}-summary"])))
    summary = draw(st.sampled_from([None, None, "", "summary text"]))
    offset = draw(st.one_of(st.none(), st.integers(0, len(b.view) + 3)))
    b.add(C(cid, forgotten, summary, offset))
    b.summary_ids.append(f"{cid}-summary")


def _condenser(draw: Any, b: _Builder) -> None:
    """docs/semantics.md §11: forget ``view[start:end]`` between two manipulation indices."""
    view = b.view.events
    indices = b.view.manipulation_indices
    first_system = next((i for i, e in enumerate(view) if e.kind == "SystemPromptEvent"), -1)
    keep_first = draw(st.integers(0, 2))
    tail = draw(st.integers(0, max(0, len(view) // 2)))
    cid = b.new_id()
    try:
        start = indices.find_next(max(keep_first, first_system + 1))
        end = indices.find_next(len(view) - tail)
    except ValueError:
        start, end = first_system + 1, len(view)  # hard context reset
    forgotten = [e.id for e in view[start:end]]
    summary = draw(st.sampled_from([None, "summary of the middle"]))
    b.add(C(cid, forgotten, summary, start))
    b.summary_ids.append(f"{cid}-summary")


def _late(draw: Any, b: _Builder) -> None:
    if b.late:
        tc = b.late.pop(draw(st.integers(0, len(b.late) - 1)))
        b.add(_observation(draw, b, tc))


def _non_llm(draw: Any, b: _Builder) -> None:
    if draw(st.booleans()):
        b.add(X(b.new_id()))
    else:
        kind = draw(st.sampled_from(NON_LLM_KINDS))
        b.add(parse_event({"id": b.new_id(), "source": "environment", "kind": kind}))


STEPS: dict[str, Callable[[Any, _Builder], None]] = {
    "user": lambda draw, b: b.add(U(b.new_id())),
    "agent": lambda draw, b: b.add(M(b.new_id(), thinking=draw(st.booleans()))),
    "system": lambda draw, b: b.add(S(b.new_id())),
    "batch": _batch,
    "late": _late,
    "orphan": lambda draw, b: b.add(_observation(draw, b, f"orphan_{b.count}")),
    "non_llm": _non_llm,
    "request": lambda draw, b: b.add(R(b.new_id())),
    "condensation": _condensation,
    "condenser": _condenser,
}
# Batches are the bulk of a real conversation.
STEP_WEIGHTS = [*STEPS, "batch", "batch", "batch"]


@st.composite
def streams(draw: Any, max_steps: int = 30) -> list[Event]:
    b = _Builder()
    if draw(st.booleans()):
        b.add(S(b.new_id()))
    for _ in range(draw(st.integers(0, max_steps))):
        STEPS[draw(st.sampled_from(STEP_WEIGHTS))](draw, b)
    return b.events


def _persisted(state: TrackerState) -> TrackerState:
    """A TrackerState as a store would write it out and read it back."""
    fields = asdict(state)
    fields["pending"] = frozenset(sorted(fields["pending"], key=str))
    return TrackerState(**fields)


@SETTINGS
@given(stream=streams(), resume_at=st.integers(0, 200))
def test_incremental_indices_match_a_full_rescan(stream: list[Event], resume_at: int) -> None:
    """(a) After every append the incremental indices equal a full rescan, and a tracker
    resumed from the persisted state continues exactly like the live one."""
    view = View()
    resumed: IndexTracker | None = None
    resumed_indices: set[int] = set()
    for n, event in enumerate(stream):
        if n == resume_at:
            resumed = IndexTracker(_persisted(view.tracker_state))
            resumed_indices = set(view.manipulation_indices)
        view.append_event(event)
        assert view.manipulation_indices == full_indices(view.events), f"after event #{n}"
        assert view.tracker_state == IndexTracker.scan(view.events)[0].state()
        if resumed is None:
            continue
        if event.kind == "Condensation":
            # A condensation rewrites the view and rescans; the store persists the new state.
            resumed = IndexTracker(_persisted(view.tracker_state))
            resumed_indices = set(view.manipulation_indices)
        elif event.is_llm_convertible:
            delta = resumed.append(event)
            if delta.removed is not None:
                resumed_indices.discard(delta.removed)
            if delta.added is not None:
                resumed_indices.add(delta.added)
        assert resumed.state() == view.tracker_state
        assert resumed_indices == view.manipulation_indices


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


@SETTINGS
@given(stream=streams())
def test_resume_path_is_an_enforced_subsequence_of_the_live_path(stream: list[Event]) -> None:
    """(b) from_events only removes; (c) its result is a fixpoint of every property;
    (d) enforcing again changes nothing."""
    live_view = View()
    for event in stream:
        live_view.append_event(event)
    resumed = View.from_events(stream)

    assert _is_subsequence(resumed.event_ids, live_view.event_ids)
    assert resumed.unhandled_condensation_request == live_view.unhandled_condensation_request
    if not resumed.enforcement_rounds:
        assert resumed.event_ids == live_view.event_ids
    removed = [i for r in resumed.enforcement_rounds for i in r.removed]
    assert len(removed) == len(live_view) - len(resumed)

    for prop in ALL_PROPERTIES:
        assert prop.enforce(resumed.events, stream) == set(), prop.name

    again, more_rounds = enforce_properties(resumed.events, stream)
    assert more_rounds == []
    assert ids(again) == resumed.event_ids
    assert resumed.manipulation_indices == full_indices(resumed.events)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(max_steps=12))
def test_from_events_of_every_prefix_is_consistent(stream: list[Event]) -> None:
    """Every prefix: the resume path stays a subsequence of the live path with the same flag
    (it need not be monotone across appends, docs/semantics.md §8)."""
    live_view = View()
    for n, event in enumerate(stream):
        live_view.append_event(event)
        resumed = View.from_events(stream[: n + 1])
        assert _is_subsequence(resumed.event_ids, live_view.event_ids)
        assert resumed.unhandled_condensation_request == live_view.unhandled_condensation_request
