"""A cascade of 2,398 enforcement rounds (docs/semantics.md §7).

OpenHands restarts enforcement by recursing, so about a thousand cascading rounds raise
``RecursionError`` there; this engine loops, and must give the fixpoint the rules define.

The stream chains 1,200 thinking tool loops; each loop holds the *late* observation of the
previous loop's action, so every loop is tied to its neighbours by a tool-call id:

    S U  A*1 | A*2 O1 | A*3 O2 | ... | A*1200 O1199 O1200 |  M   C(forget A*1, "s" at 2)
         \\____loop 1   \\____loop 2              \\____loop 1200 (ends at M)

Forgetting ``A*1`` pulls the whole chain down, one link per round:

    round 1     ToolCallMatching   O1          (its action A*1 is gone)
    round 2     ToolLoopAtomicity  A*2         (loop 2 = {A*2, O1} is now partial)
    round 3     ToolCallMatching   O2
    round 4     ToolLoopAtomicity  A*3
    ...
    round 2k-1  ToolCallMatching   O(k)
    round 2k    ToolLoopAtomicity  A*(k+1)
    ...
    round 2397  ToolCallMatching   O1199
    round 2398  ToolLoopAtomicity  A*1200 O1200  (loop 1200 loses O1199; both rest go at once)

Nothing else is touched: the resume view is ``S U ΣC M``.
"""

from __future__ import annotations

import sys

from viewstore.domain.events import Event
from viewstore.domain.view import View, full_indices

from ._helpers import A, C, M, O, S, U

N = 1200
TCM = "ToolCallMatchingProperty"
TLA = "ToolLoopAtomicityProperty"


def chained_loops(n: int) -> list[Event]:
    stream = [S(), U(), A("A1", "t1", "r1", thinking=True)]
    for k in range(2, n + 1):
        stream += [A(f"A{k}", f"t{k}", f"r{k}", thinking=True), O(f"O{k - 1}", f"t{k - 1}")]
    return [*stream, O(f"O{n}", f"t{n}"), M(), C("C", ["A1"], "s", 2)]


def expected_rounds(n: int) -> list[tuple[str, tuple[str, ...]]]:
    rounds: list[tuple[str, tuple[str, ...]]] = []
    for k in range(1, n - 1):
        rounds += [(TCM, (f"O{k}",)), (TLA, (f"A{k + 1}",))]
    return [*rounds, (TCM, (f"O{n - 1}",)), (TLA, (f"A{n}", f"O{n}"))]


def test_the_cascade_is_deeper_than_the_recursion_limit() -> None:
    assert len(expected_rounds(N)) == 2 * N - 2 == 2398
    assert sys.getrecursionlimit() < 2 * N - 2


def test_small_chain_by_hand() -> None:
    """The same shape with 3 loops: ``S U A*1 A*2 O1 A*3 O2 O3 M C``."""
    view = View.from_events(chained_loops(3))
    assert [(r.property, r.removed) for r in view.enforcement_rounds] == [
        (TCM, ("O1",)),
        (TLA, ("A2",)),
        (TCM, ("O2",)),
        (TLA, ("A3", "O3")),
    ]
    assert view.event_ids == ["S", "U", "C-summary", "M"]


def test_1200_chained_loops_cascade_to_the_fixpoint() -> None:
    stream = chained_loops(N)
    assert len(stream) == 2 * N + 4  # S U A*1, 2(N-1) for loops 2..N, O(N) M C

    # The live path keeps everything: A*1 is gone, O1 is an orphan, and each A*k waits for
    # O(k) inside the next loop, so only the head and the last gap before M are indices.
    live = View()
    for event in stream:
        live.append_event(event)
    assert len(live) == 2 * N + 3
    assert live.event_ids[:6] == ["S", "U", "C-summary", "A2", "O1", "A3"]
    assert live.event_ids[-3:] == [f"O{N - 1}", f"O{N}", "M"]
    assert live.manipulation_indices == {0, 1, 2, 3, 2 * N + 2, 2 * N + 3}
    assert live.manipulation_indices == full_indices(live.events)

    resumed = View.from_events(stream)
    got = [(r.property, r.removed) for r in resumed.enforcement_rounds]
    assert len(got) == 2398
    assert got == expected_rounds(N)
    assert resumed.event_ids == ["S", "U", "C-summary", "M"]
    assert resumed.manipulation_indices == {0, 1, 2, 3, 4}
    assert resumed.unhandled_condensation_request is False
