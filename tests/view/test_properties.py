"""The view properties, one rule at a time, as docs/semantics.md §4, §6 and §7 state them.

Notation (docs/semantics.md): ``S`` system prompt, ``U`` user message, ``M`` agent message,
``A(tc, r)`` action, ``A*`` thinking action, ``O(tc)`` observation, ``E(tc)`` agent error,
``J(tc)`` rejection, ``C`` condensation, ``R`` request, ``X`` non-LLM event, ``Σc`` the summary
of condensation ``c`` (id ``"c-summary"``). Indices are gaps: ``0`` before the first event,
``n`` after the last. Each case names the micro vector it mirrors.
"""

from __future__ import annotations

from typing import Any

import pytest

from viewstore.domain.errors import NoManipulationIndexError, ViewstoreError
from viewstore.domain.events import Event, parse_event, summary_event
from viewstore.domain.view import (
    ManipulationIndices,
    View,
    condense,
    enforce_properties,
    forget,
    full_indices,
    summary_position,
)
from viewstore.domain.view.properties import (
    ALL_PROPERTIES,
    BatchAtomicityProperty,
    ObservationUniquenessProperty,
    ToolCallMatchingProperty,
    ToolLoopAtomicityProperty,
)

from ._helpers import A, C, E, J, M, O, R, S, U, X, ids, live

UNIQUENESS = ObservationUniquenessProperty()
BATCH = BatchAtomicityProperty()
MATCHING = ToolCallMatchingProperty()
LOOP = ToolLoopAtomicityProperty()

OU, BA, TCM, TLA = (p.name for p in ALL_PROPERTIES)


def all_of(n: int) -> set[int]:
    return set(range(n + 1))


def rounds(view: View) -> list[tuple[str, list[str]]]:
    return [(r.property, list(r.removed)) for r in view.enforcement_rounds]


def action_with_blocks(eid: str, tc: str, r: str, blocks: Any) -> Event:
    payload = A(eid, tc, r).payload
    if blocks is None:
        del payload["thinking_blocks"]
    else:
        payload["thinking_blocks"] = blocks
    return parse_event(payload)


# =========================================================================== property order


def test_properties_are_consulted_in_the_spec_order() -> None:
    assert [p.name for p in ALL_PROPERTIES] == [
        "ObservationUniquenessProperty",
        "BatchAtomicityProperty",
        "ToolCallMatchingProperty",
        "ToolLoopAtomicityProperty",
    ]


def test_empty_view_has_index_zero_only() -> None:
    """m01: the empty view gives {0} under every property, on both paths."""
    for prop in ALL_PROPERTIES:
        assert prop.manipulation_indices([]) == {0}
        assert prop.enforce([], []) == set()
    assert full_indices([]) == {0}
    assert View().manipulation_indices == {0}
    assert View.from_events([]).manipulation_indices == {0}


# =========================================================================== 6.1 uniqueness


def test_uniqueness_never_restricts_indices() -> None:
    """6.1: a duplicate observation is only a warning upstream, so the set is complete."""
    view = [S(), U(), A("A1", "t1", "r1"), E("E1", "t1"), O("O1", "t1"), M()]
    assert UNIQUENESS.manipulation_indices(view) == all_of(6)


def test_uniqueness_first_observation_in_view_order_wins() -> None:
    """m11 (interrupt recovery): a synthetic error, then the late real observation.

    S U A1(t1) X E(t1) O(t1) M      live:   both kept, indices {0,1,2,4,5,6}
                       ^^^^^ dup    resume: O dropped,  indices {0,1,2,4,5}
    """
    stream = [S(), U(), A("A1", "t1", "r1"), X("INT"), E("E1", "t1"), O("O1", "t1"), M()]
    view = [e for e in stream if e.kind != "ConversationStateUpdateEvent"]
    assert UNIQUENESS.enforce(view, stream) == {"O1"}

    assert live(stream).manipulation_indices == {0, 1, 2, 4, 5, 6}
    resumed = View.from_events(stream)
    assert resumed.event_ids == ["S", "U", "A1", "E1", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 4, 5}
    assert rounds(resumed) == [(OU, ["O1"])]


def test_uniqueness_counts_only_the_view() -> None:
    """m12: forgetting the first of two observations makes the second the survivor."""
    stream = [S(), U(), A("A1", "t1", "r1"), E("E1", "t1"), O("O1", "t1"), C("C", ["E1"])]
    resumed = View.from_events(stream)
    assert resumed.event_ids == ["S", "U", "A1", "O1"]
    assert resumed.manipulation_indices == {0, 1, 2, 4}
    assert resumed.enforcement_rounds == []


# =========================================================================== 6.2 batches


def test_batch_indices_guard_adjacent_actions_only() -> None:
    """6.2: a 3-call batch loses the two gaps inside it (indices 3 and 4).

    S U A1(t1,r) A2(t2,r) A3(t3,r) O1 O2 O3 M
    0 1 2        x        x        5  6  7  8 9
    """
    view = [
        S(), U(),
        A("A1", "t1", "r"), A("A2", "t2", "r"), A("A3", "t3", "r"),
        O("O1", "t1"), O("O2", "t2"), O("O3", "t3"), M(),
    ]  # fmt: skip
    assert BATCH.manipulation_indices(view) == all_of(9) - {3, 4}
    # Different responses side by side are two batches: the gap between them stays.
    assert BATCH.manipulation_indices([A("A1", "t1", "r1"), A("A2", "t2", "r2")]) == {0, 1, 2}


def test_worked_example_m16_invalid_call_mid_batch() -> None:
    """6 worked example (m16): A2's call was invalid, so an agent error sits inside the batch.

    S U A1(t1,r) A2(t2,r) E(t2) A3(t3,r) O(t1) O(t3) M
    0 1 2        x        .     .        .     .     8 9
                 ^ batch (A1|A2 adjacent); A2|E and E|A3 are not guarded by the batch
    pending t1 from index 3 to 7: ToolCallMatching removes 3..7
    """
    view = [
        S(), U(),
        A("A1", "t1", "r"), A("A2", "t2", "r"), E("E2", "t2"), A("A3", "t3", "r"),
        O("O1", "t1"), O("O3", "t3"), M(),
    ]  # fmt: skip
    assert BATCH.manipulation_indices(view) == all_of(9) - {3}
    assert MATCHING.manipulation_indices(view) == {0, 1, 2, 8, 9}
    assert LOOP.manipulation_indices(view) == all_of(9)
    assert full_indices(view) == {0, 1, 2, 8, 9}
    # The whole batch is present, every call has a result: enforcement keeps everything.
    resumed = View.from_events(view)
    assert resumed.event_ids == ids(view)
    assert resumed.enforcement_rounds == []


def test_batch_enforcement_removes_only_actions_then_matching_cascades() -> None:
    """m13: forgetting one action of a 3-call batch takes two rounds.

    S U A1 A2 A3 O1 O2 O3 M  C(forget A2, summary at 2)
    live:   S U ΣC A1 A3 O1 O2 O3 M   indices {0,1,2,3,8,9}
    round 1 BatchAtomicity  removes A1 A3   (B_view(r)={A1,A3} != {A1,A2,A3})
    round 2 ToolCallMatching removes O1 O2 O3 (now orphans)
    """
    stream = [
        S(), U(),
        A("A1", "t1", "r"), A("A2", "t2", "r"), A("A3", "t3", "r"),
        O("O1", "t1"), O("O2", "t2"), O("O3", "t3"), M(),
        C("C", ["A2"], "s", 2),
    ]  # fmt: skip
    incremental = live(stream)
    assert incremental.event_ids == ["S", "U", "C-summary", "A1", "A3", "O1", "O2", "O3", "M"]
    assert incremental.manipulation_indices == {0, 1, 2, 3, 8, 9}
    assert BATCH.enforce(incremental.events, stream) == {"A1", "A3"}

    resumed = View.from_events(stream)
    assert rounds(resumed) == [(BA, ["A1", "A3"]), (TCM, ["O1", "O2", "O3"])]
    assert resumed.event_ids == ["S", "U", "C-summary", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 3, 4}


def test_interleaved_batch_is_not_guarded_but_is_enforced() -> None:
    """m26: A1 O1 A2 O2 share a response id. No two actions are adjacent, so the indices
    allow index 4 (after O1); cutting [A1, O1] there still breaks the batch for enforcement.

        S U A1(t1,r) O1 A2(t2,r) O2 M     indices {0,1,2,4,6,7}
        C(forget A1, O1) -> S U A2 O2 M   live {0,1,2,4,5}; resume drops A2, then O2
    """
    before = [S(), U(), A("A1", "t1", "r"), O("O1", "t1"), A("A2", "t2", "r"), O("O2", "t2"), M()]
    assert BATCH.manipulation_indices(before) == all_of(7)
    assert full_indices(before) == {0, 1, 2, 4, 6, 7}

    stream = [*before, C("C", ["O1", "A1"])]
    incremental = live(stream)
    assert incremental.event_ids == ["S", "U", "A2", "O2", "M"]
    assert incremental.manipulation_indices == {0, 1, 2, 4, 5}
    resumed = View.from_events(stream)
    assert rounds(resumed) == [(BA, ["A2"]), (TCM, ["O2"])]
    assert resumed.event_ids == ["S", "U", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 3}


# =========================================================================== 6.3 matching


def test_matching_unresolved_action_blocks_every_later_index() -> None:
    """m34: A1 never gets a result. Live: nothing after it is an index, not even n.
    Resume: A1 is dropped and the later indices come back.

        S U A1(t1) U2 A2(t2) O2 M     live {0,1,2}
        S U        U2 A2     O2 M     resume {0,1,2,3,5,6}
    """
    stream = [S(), U(), A("A1", "t1", "r1"), U("U2"), A("A2", "t2", "r2"), O("O2", "t2"), M()]
    assert MATCHING.manipulation_indices(stream) == {0, 1, 2}
    incremental = live(stream)
    assert incremental.manipulation_indices == {0, 1, 2}

    resumed = View.from_events(stream)
    assert rounds(resumed) == [(TCM, ["A1"])]
    assert resumed.event_ids == ["S", "U", "U2", "A2", "O2", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 3, 5, 6}


def test_matching_observation_before_its_action_resolves_nothing() -> None:
    """m14: ``[S,U,O(t),A(t),M]`` -> {0,1,2,3}; matching is by sets, so both are kept."""
    stream = [S(), U(), O("O", "t99"), A("A", "t99", "r1"), M()]
    assert full_indices(stream) == {0, 1, 2, 3}
    assert MATCHING.enforce(stream, stream) == set()
    resumed = View.from_events(stream)
    assert resumed.event_ids == ["S", "U", "O", "A", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 3}


def test_matching_orphan_observation_has_no_index_effect() -> None:
    """m15: an observation nobody asked for: no index lost live, dropped on resume."""
    stream = [S(), U(), O("O", "t77"), M()]
    assert live(stream).manipulation_indices == all_of(4)
    resumed = View.from_events(stream)
    assert rounds(resumed) == [(TCM, ["O"])]
    assert resumed.event_ids == ["S", "U", "M"]


def test_matching_reused_tool_call_id() -> None:
    """m10: two batches reuse ``call_0``. The resolved id becomes pending again at A2.

    S U A1(c0,r1) O1(c0) A2(c0,r2) O2(c0) M     live {0,1,2,4,6,7}
    resume: O2 is a duplicate (uniqueness); A2 then has no result of its own, but
    matching is by set, so A2 stays, and every index after it is blocked: {0,1,2,4}
    """
    stream = [
        S(), U(),
        A("A1", "call_0", "r1"), O("O1", "call_0"),
        A("A2", "call_0", "r2"), O("O2", "call_0"), M(),
    ]  # fmt: skip
    assert live(stream).manipulation_indices == {0, 1, 2, 4, 6, 7}
    resumed = View.from_events(stream)
    assert rounds(resumed) == [(OU, ["O2"])]
    assert resumed.event_ids == ["S", "U", "A1", "O1", "A2", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 4}


def test_matching_one_observation_resolves_every_pending_action_with_its_id() -> None:
    """Pending ids are a set of strings: two pending A(t) are resolved by a single O(t)."""
    view = [U(), A("A1", "t", "r1"), A("A2", "t", "r2"), O("O", "t"), M()]
    assert MATCHING.manipulation_indices(view) == {0, 1, 4, 5}


def test_parallel_observations_in_reverse_order() -> None:
    """m35: ``A1 A2`` then ``O2 O1``: nothing in between is an index."""
    stream = [S(), U(), A("A1", "t1", "r"), A("A2", "t2", "r"), O("O2", "t2"), O("O1", "t1"), M()]
    assert full_indices(stream) == {0, 1, 2, 6, 7}
    assert View.from_events(stream).event_ids == ids(stream)


def test_rejections_are_observation_like() -> None:
    """m36: a user rejection and a hook rejection answer their actions; X is ignored."""
    stream = [
        S(), U(),
        A("A1", "t1", "r"), A("A2", "t2", "r"), X(),
        J("J1", "t1", "user"), J("J2", "t2", "hook"), M(),
    ]  # fmt: skip
    resumed = View.from_events(stream)
    assert resumed.event_ids == ["S", "U", "A1", "A2", "J1", "J2", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 6, 7}
    assert resumed.enforcement_rounds == []


# =========================================================================== 6.4 tool loops


def test_consecutive_tool_loops_keep_their_boundary() -> None:
    """m17: ``[S,U,A*,O,A*,O,M]`` -> {0,1,2,4,6,7}: a loop's start and end are kept."""
    view = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), A("A2", "t2", "r2", True),
            O("O2", "t2"), M()]  # fmt: skip
    assert LOOP.manipulation_indices(view) == {0, 1, 2, 4, 6, 7}
    assert full_indices(view) == {0, 1, 2, 4, 6, 7}


def test_tool_loop_spans_several_responses() -> None:
    """m18: the loop runs from A*1 over every following action/observation until M.

    S U A*1 O1 A2 O2 A3 O3 M
    0 1 2   x  x  x  x  x  8 9
    """
    view = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), A("A2", "t2", "r2"),
            O("O2", "t2"), A("A3", "t3", "r3"), O("O3", "t3"), M()]  # fmt: skip
    assert LOOP.manipulation_indices(view) == {0, 1, 2, 8, 9}
    assert full_indices(view) == {0, 1, 2, 8, 9}


def test_summary_inside_a_loop_splits_it_for_indices() -> None:
    """m19: ΣC lands at 4, inside the loop: index 4 (before Σ) and 5 (after it) open up.

    S U A*1 O1 ΣC A2 O2
    0 1 2   x  4  5  x  7      (6 is lost to the pending t2, not to the loop)
    """
    stream = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), A("A2", "t2", "r2"),
              O("O2", "t2"), C("C", [], "mid-loop summary", 4)]  # fmt: skip
    view = live(stream)
    assert view.event_ids == ["S", "U", "A1", "O1", "C-summary", "A2", "O2"]
    assert LOOP.manipulation_indices(view.events) == all_of(7) - {3}
    assert view.manipulation_indices == {0, 1, 2, 4, 5, 7}
    assert View.from_events(stream).manipulation_indices == {0, 1, 2, 4, 5, 7}


@pytest.mark.parametrize(
    ("blocks", "starts_loop"),
    [
        pytest.param([{"type": "redacted_thinking", "data": "EmwKAhgB"}], True, id="m27-redacted"),
        pytest.param([{"type": "thinking", "thinking": ""}], True, id="m29-empty-thinking"),
        pytest.param([], False, id="empty-list"),
        pytest.param(None, False, id="field-missing"),
    ],
)
def test_any_thinking_block_starts_a_loop(blocks: Any, starts_loop: bool) -> None:
    """m27/m29: the content of the blocks never matters, only that the list is non-empty."""
    first = action_with_blocks("A1", "t1", "r1", blocks)
    assert first.is_thinking_action is starts_loop
    view = [S(), U(), first, O("O1", "t1"), A("A2", "t2", "r2"), O("O2", "t2"), M()]
    assert full_indices(view) == ({0, 1, 2, 6, 7} if starts_loop else {0, 1, 2, 4, 6, 7})


def test_message_with_thinking_ends_a_loop() -> None:
    """m28: an agent message carrying thinking blocks closes the loop and starts none.

    S U A*1 O1 M* A2(t2,r3) O2
    0 1 2   x  4  5         x  7
    """
    view = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), M("M", thinking=True),
            A("A2", "t2", "r3"), O("O2", "t2")]  # fmt: skip
    assert LOOP.manipulation_indices(view) == all_of(7) - {3}
    assert full_indices(view) == {0, 1, 2, 4, 5, 7}


def test_tail_action_in_loop_stops_the_indices_and_drops_the_loop_on_resume() -> None:
    """m08 / 10.2: ``[S,U,A*,O,A,O,A]`` -> {0,1,2} live; resume keeps only ``[S,U]``."""
    stream = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), A("A2", "t2", "r2"),
              O("O2", "t2"), A("A3", "t3", "r3")]  # fmt: skip
    assert live(stream).manipulation_indices == {0, 1, 2}
    resumed = View.from_events(stream)
    assert rounds(resumed) == [(TCM, ["A3"]), (TLA, ["A1", "O1", "A2", "O2"])]
    assert resumed.event_ids == ["S", "U"]
    assert resumed.manipulation_indices == {0, 1, 2}


def test_loop_partially_forgotten_is_dropped_on_resume() -> None:
    """m31: forgetting the first pair of a 3-response loop.

    S U A*1 O1 A2 O2 A3 O3 M  C(forget A*1 O1, summary at 2)
    live:   S U ΣC A2 O2 A3 O3 M     {0,1,2,3,5,7,8}
    resume: ToolLoopAtomicity drops A2 O2 A3 O3 -> S U ΣC M
    """
    stream = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), A("A2", "t2", "r2"),
              O("O2", "t2"), A("A3", "t3", "r3"), O("O3", "t3"), M(),
              C("C", ["O1", "A1"], "s", 2)]  # fmt: skip
    incremental = live(stream)
    assert incremental.event_ids == ["S", "U", "C-summary", "A2", "O2", "A3", "O3", "M"]
    assert incremental.manipulation_indices == {0, 1, 2, 3, 5, 7, 8}
    assert LOOP.enforce(incremental.events, stream) == {"A2", "O2", "A3", "O3"}
    resumed = View.from_events(stream)
    assert rounds(resumed) == [(TLA, ["A2", "O2", "A3", "O3"])]
    assert resumed.event_ids == ["S", "U", "C-summary", "M"]


def test_non_llm_event_splits_a_loop_for_enforcement_only() -> None:
    """m09 / 7: X sits inside the loop. The view never sees X, so the indices treat
    ``O1 A2 O2`` as one loop; enforcement loops come from all events, where X closes
    ``{A*1, O1}`` and A2 (no thinking) belongs to no loop.

        S U A*1 O1 X A2 O2  C(forget A*1)
        live:   S U O1 A2 O2         {0,1,2,3,5}
        resume: O1 orphaned (matching); A2 O2 survive
        without X: the loop is {A*1,O1,A2,O2}, so A2 O2 go too
    """
    with_x = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), X(), A("A2", "t2", "r2"),
              O("O2", "t2"), C("C", ["A1"])]  # fmt: skip
    assert live(with_x).event_ids == ["S", "U", "O1", "A2", "O2"]
    assert live(with_x).manipulation_indices == {0, 1, 2, 3, 5}
    resumed = View.from_events(with_x)
    assert rounds(resumed) == [(TCM, ["O1"])]
    assert resumed.event_ids == ["S", "U", "A2", "O2"]
    assert resumed.manipulation_indices == {0, 1, 2, 4}

    without_x = [e for e in with_x if e.id != "X"]
    resumed = View.from_events(without_x)
    assert rounds(resumed) == [(TCM, ["O1"]), (TLA, ["A2", "O2"])]
    assert resumed.event_ids == ["S", "U"]


@pytest.mark.parametrize("splitter", [X(), R("R0"), C("C0"), M("M0")], ids=lambda e: e.kind)
def test_every_non_tool_event_closes_an_enforcement_loop(splitter: Event) -> None:
    """7: messages, requests, condensations and non-LLM events all end a loop in all_events."""
    stream = [A("A1", "t1", "r1", True), O("O1", "t1"), splitter, A("A2", "t2", "r2"),
              O("O2", "t2")]  # fmt: skip
    view = [e for e in stream if e.id in {"A2", "O2"}]
    assert LOOP.enforce(view, stream) == set()
    assert LOOP.enforce(view, [e for e in stream if e is not splitter]) == {"A2", "O2"}


def test_respecting_the_indices_does_not_guarantee_survival() -> None:
    """m37: ΣC1 inside the loop opens index 5, so forgetting ``A2 O2`` respects the indices;
    enforcement's loop (over all events, where Σ does not exist) is still broken.

        S U A*1 O1 A2 O2 M  C1(summary at 4)  C2(forget A2 O2)
        after C1: S U A*1 O1 ΣC1 A2 O2 M      indices {0,1,2,4,5,7,8}: [5, 7) is a legal cut
        live:     S U A*1 O1 ΣC1 M            {0,1,2,4,5,6}
        resume:   ToolLoopAtomicity drops A*1 O1 -> S U ΣC1 M
    """
    head = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), A("A2", "t2", "r2"),
            O("O2", "t2"), M(), C("C1", [], "inserted inside the loop", 4)]  # fmt: skip
    after_c1 = live(head)
    assert after_c1.event_ids == ["S", "U", "A1", "O1", "C1-summary", "A2", "O2", "M"]
    assert after_c1.manipulation_indices == {0, 1, 2, 4, 5, 7, 8}

    stream = [*head, C("C2", ["O2", "A2"])]
    assert live(stream).manipulation_indices == {0, 1, 2, 4, 5, 6}
    resumed = View.from_events(stream)
    assert rounds(resumed) == [(TLA, ["A1", "O1"])]
    assert resumed.event_ids == ["S", "U", "C1-summary", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 3, 4}


# =========================================================================== 7 enforcement


def test_enforcement_restarts_from_the_first_property() -> None:
    """7: each round applies the *first* property that asks for removals, then starts over.
    A2 of a 2-call batch never got a result:

        U A1(t1,r) A2(t2,r) O1(t1) M
        round 1  ToolCallMatching removes A2   (batch still whole before this)
        round 2  BatchAtomicity   removes A1   (restart: B_view(r)={A1} != {A1,A2})
        round 3  ToolCallMatching removes O1   (now an orphan)
    """
    stream = [U(), A("A1", "t1", "r"), A("A2", "t2", "r"), O("O1", "t1"), M()]
    enforced, done = enforce_properties(stream, stream)
    assert [(r.property, r.removed) for r in done] == [
        (TCM, ("A2",)),
        (BA, ("A1",)),
        (TCM, ("O1",)),
    ]
    assert ids(enforced) == ["U", "M"]


def test_uniqueness_goes_before_matching() -> None:
    view = [S(), U(), A("A1", "t1", "r1"), O("O1", "t1"), O("O1b", "t1"), O("O9", "t9"), M()]
    enforced, done = enforce_properties(view, view)
    assert [(r.property, r.removed) for r in done] == [(OU, ("O1b",)), (TCM, ("O9",))]
    assert ids(enforced) == ["S", "U", "A1", "O1", "M"]


def test_enforcement_removes_ids_in_view_order() -> None:
    stream = [U(), A("A3", "t3", "r"), A("A1", "t1", "r"), A("A2", "t2", "r"),
              O("O3", "t3"), O("O1", "t1"), O("O2", "t2")]  # fmt: skip
    view = [e for e in stream if e.id != "A1"]
    enforced, done = enforce_properties(view, stream)
    assert [(r.property, r.removed) for r in done] == [
        (BA, ("A3", "A2")),
        (TCM, ("O3", "O1", "O2")),
    ]
    assert ids(enforced) == ["U"]


def test_enforcement_never_touches_the_request_flag() -> None:
    """5: the flag comes from the fold; a request at the end stays set after enforcement."""
    stream = [S(), U(), O("O9", "t9"), R()]
    resumed = View.from_events(stream)
    assert resumed.event_ids == ["S", "U"]
    assert resumed.unhandled_condensation_request is True


# =========================================================================== find_next


def test_find_next_returns_the_smallest_index_at_or_after_the_threshold() -> None:
    indices = ManipulationIndices({0, 1, 2, 8, 9})
    assert indices.find_next(-5) == 0
    assert indices.find_next(0) == 0
    assert indices.find_next(2) == 2
    assert indices.find_next(3) == 8
    assert indices.find_next(9) == 9


@pytest.mark.parametrize("threshold", [10, 11, 1000])
def test_find_next_beyond_the_largest_index_raises(threshold: int) -> None:
    indices = ManipulationIndices({0, 1, 2, 8, 9})
    with pytest.raises(NoManipulationIndexError) as info:
        indices.find_next(threshold)
    assert str(info.value) == f"No manipulation index found >= {threshold}."
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ViewstoreError)


def test_find_next_fails_past_an_unresolved_action() -> None:
    """10.2 / m08: with an unresolved action, n itself is not an index."""
    view = live([S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), A("A2", "t2", "r2"),
                 O("O2", "t2"), A("A3", "t3", "r3")])  # fmt: skip
    indices = view.manipulation_indices
    assert indices.find_next(2) == 2
    for threshold in (3, 6, 7):
        with pytest.raises(ValueError, match=rf"^No manipulation index found >= {threshold}\.$"):
            indices.find_next(threshold)


def test_complete_indices() -> None:
    assert ManipulationIndices.complete([]) == {0}
    assert ManipulationIndices.complete([S(), U(), M()]) == {0, 1, 2, 3}
    assert ManipulationIndices.complete("abcde") == all_of(5)
    assert isinstance(ManipulationIndices.complete([S()]), ManipulationIndices)


def test_view_indices_are_a_copy() -> None:
    view = live([S(), U()])
    view.manipulation_indices.discard(1)
    assert view.manipulation_indices == {0, 1, 2}


# =========================================================================== 3-4 condensation


def test_condensation_summary_offset_beyond_end_appends() -> None:
    """m03: ``[S,U,M] + C(forget={U}, summary="s", offset=99)`` -> ``[S, M, ΣC]``."""
    view = live([S(), U(), M(), C("C", ["U"], "summary", 99)])
    assert view.event_ids == ["S", "M", "C-summary"]
    assert view.manipulation_indices == all_of(3)
    assert summary_position(C("C", [], "s", 99), 2) == 2


def test_two_summaries_at_the_same_offset_later_first() -> None:
    """m04: list.insert at 1 twice: the later summary ends up first."""
    view = live([S(), U(), M(), C("C1", [], "first", 1), C("C2", [], "second", 1)])
    assert view.event_ids == ["S", "C2-summary", "C1-summary", "U", "M"]


def test_forget_happens_before_insert() -> None:
    """m05: a condensation listing its own id and its own summary id still inserts it."""
    view = live([S(), U(), M(), C("C", ["C", "C-summary", "U"], "kept", 1)])
    assert view.event_ids == ["S", "C-summary", "M"]


def test_forward_reference_forgets_nothing() -> None:
    """m06: C names M before M exists; M is appended later and stays (no global flag)."""
    stream = [S(), U(), C("C", ["M"]), M()]
    assert live(stream).event_ids == ["S", "U", "M"]
    assert View.from_events(stream).event_ids == ["S", "U", "M"]


@pytest.mark.parametrize(
    ("summary", "offset", "inserted"),
    [
        pytest.param("no offset", None, False, id="summary-without-offset"),
        pytest.param(None, 0, False, id="offset-without-summary"),
        pytest.param(None, None, False, id="neither"),
        pytest.param("", 1, True, id="empty-summary-is-inserted"),
        pytest.param("s", 0, True, id="both"),
    ],
)
def test_summary_needs_both_text_and_offset(
    summary: str | None, offset: int | None, inserted: bool
) -> None:
    """m07: only a condensation with both fields set inserts ``"<id>-summary"``."""
    condensation = C("C", [], summary, offset)
    assert condensation.inserts_summary is inserted
    view = live([S(), U(), condensation])
    expected = ["S", "U"]
    if inserted:
        expected.insert(offset or 0, "C-summary")
    assert view.event_ids == expected


def test_m07_sequence() -> None:
    view = live([S(), U(), C("C1", [], "no offset"), C("C2", [], None, 0), C("C3", [], "", 1)])
    assert view.event_ids == ["S", "C3-summary", "U"]


def test_the_summary_event() -> None:
    condensation = C("C", ["U"], "what happened", 1)
    summary = summary_event(condensation)
    assert summary.id == "C-summary"
    assert summary.kind == "CondensationSummaryEvent"
    assert summary.summary == "what happened"
    assert summary.source == "environment"
    assert summary.is_llm_convertible
    assert not summary.is_action
    assert not summary.is_observation
    assert summary.payload == {
        "id": "C-summary",
        "source": "environment",
        "summary": "what happened",
        "kind": "CondensationSummaryEvent",
    }


def test_forgetting_old_and_phantom_summaries() -> None:
    """m23: C4 had no summary, C5's summary is forgotten by C6; naming either again is a no-op.

    S U M  C4()  C5(forget U, "sum2" at 1)  C6(forget ΣC5)  C7(forget ΣC4 ΣC5, "sum4" at 0)
    -> ΣC7 S M
    """
    stream = [S(), U(), M(), C("C4"), C("C5", ["U"], "sum2", 1), C("C6", ["C5-summary"]),
              C("C7", ["C4-summary", "C5-summary"], "sum4", 0)]  # fmt: skip
    assert live(stream[:5]).event_ids == ["S", "C5-summary", "M"]
    assert live(stream[:6]).event_ids == ["S", "M"]
    assert live(stream).event_ids == ["C7-summary", "S", "M"]
    assert live(stream).manipulation_indices == all_of(3)


def test_forgetting_non_llm_ids_does_nothing() -> None:
    """m25: ids of a state update, a request and an earlier condensation are not in the view."""
    stream = [S(), U(), X(), R("R"), C("C5"), C("C6", ["R", "X", "C5"]), M()]
    view = live(stream)
    assert view.event_ids == ["S", "U", "M"]
    assert view.unhandled_condensation_request is False


def test_forgetting_the_system_prompt_is_allowed() -> None:
    """m22: the view logic does not protect S; only the condenser avoids it."""
    assert live([S(), U(), C("C", ["S"], "summary", 0)]).event_ids == ["C-summary", "U"]


def test_condensation_mid_batch_orphans_the_late_observation() -> None:
    """m32: C forgets the pending A1; its observation then arrives with nothing to answer."""
    stream = [S(), U(), A("A1", "t1", "r1"), C("C", ["A1"], "s", 2), O("O1", "t1"), M()]
    incremental = live(stream)
    assert incremental.event_ids == ["S", "U", "C-summary", "O1", "M"]
    assert incremental.manipulation_indices == all_of(5)
    resumed = View.from_events(stream)
    assert rounds(resumed) == [(TCM, ["O1"])]
    assert resumed.event_ids == ["S", "U", "C-summary", "M"]


def test_hard_reset_keeps_the_system_prompt() -> None:
    """m33: forget everything after S, summary at 1."""
    stream = [S(), U(), A("A1", "t1", "r1", True), O("O1", "t1"), M(), R(),
              C("C", ["U", "O1", "A1", "M"], "everything so far", 1), U("U2")]  # fmt: skip
    view = View.from_events(stream)
    assert view.event_ids == ["S", "C-summary", "U2"]
    assert view.manipulation_indices == all_of(3)
    assert view.unhandled_condensation_request is False


def test_request_flag() -> None:
    """3, m20, m21: a condensation clears the flag (even with no request before it); the
    last request or condensation decides; several requests keep it set."""
    assert live([S(), R()]).unhandled_condensation_request is True
    assert live([S(), U(), R(), C("C"), M()]).unhandled_condensation_request is False
    assert live([S(), C("C")]).unhandled_condensation_request is False
    stream = [S(), U(), R("R1"), C("C"), R("R2"), R("R3"), M()]
    assert live(stream).unhandled_condensation_request is True
    assert View.from_events(stream).unhandled_condensation_request is True
    assert live(stream).event_ids == ["S", "U", "M"]


def test_forget_and_condense_helpers() -> None:
    view = [S(), U(), M()]
    assert ids(forget(view, C("C", ["U", "nope"]))) == ["S", "M"]
    assert ids(forget(view, C("C"))) == ["S", "U", "M"]
    c = C("C", ["S"], "s", 0)
    assert ids(condense(view, c, summary_event(c))) == ["C-summary", "U", "M"]


def test_acp_tool_call_is_not_an_action() -> None:
    """m24: ACPToolCallEvent has a tool_call_id but is ignored entirely."""
    acp = parse_event({"id": "P", "tool_call_id": "toolu_01", "kind": "ACPToolCallEvent"})
    stream = [S(), U(), acp, M()]
    view = View.from_events(stream)
    assert view.event_ids == ["S", "U", "M"]
    assert view.manipulation_indices == all_of(3)
