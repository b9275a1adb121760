"""Conversations the viewer tests browse: the demo (a real SDK-shaped run with a
condensation), one whose forgotten events form two separate runs of the view, and one whose
text is an HTML injection attempt."""

from __future__ import annotations

from dataclasses import dataclass

from viewstore import EventStore
from viewstore.demo import run_demo

from ..store._helpers import A, C, M, O, R, S, U

INJECTION = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@dataclass(frozen=True)
class Browsed:
    demo: str
    demo_condensation: int  # seq of the demo's condensation
    demo_forgotten: list[str]
    ranges: str
    script: str


def populate(store: EventStore) -> Browsed:
    store.create_schema()
    demo = run_demo(store, "demo-conversation")
    log = store.events(demo.conversation_id)
    (condensation,) = [e for e in log if e.kind == "Condensation"]
    store.append(
        "two-ranges",
        [
            S("S"),
            U("U"),
            A("a0", "tc0", "r0"),
            O("o0", "tc0"),
            M("m1", "looked at it"),
            A("a1", "tc1", "r1"),
            O("o1", "tc1"),
            M("m2", "looked again"),
            R("req"),
            C("c1", ["a0", "o0", "a1", "o1"], "two tool calls, both ok", 2),
            M("m3", "after the condensation"),
        ],
    )
    store.append("script-conversation", [S("S"), U("U", INJECTION), M("M", INJECTION)])
    return Browsed(
        demo=demo.conversation_id,
        demo_condensation=condensation.seq,
        demo_forgotten=list(condensation.payload["forgotten_event_ids"]),
        ranges="two-ranges",
        script="script-conversation",
    )
