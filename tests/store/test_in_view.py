"""``in_view`` answers what a read of the view answers, on conversations with summaries, with
rows that left the view, and on forks (inside their source's part, past it, at its present),
now and as of seqs all along: an event is found by its seq in the lineage's
logs and a summary by the id its row holds."""

from __future__ import annotations

from typing import Any

from viewstore import EventStore

from ..contract.test_view_rows import rich_history
from ._helpers import A, C, O, S, U


def long_history(pairs: int) -> list[dict[str, Any]]:
    events = [S(), U("u")]
    for i in range(pairs):
        events += [A(f"a{i}", f"t{i}", f"r{i}"), O(f"o{i}", f"t{i}")]
    return events


def fill(store: EventStore, pairs: int = 300) -> None:
    """Summaries, rows that left the view, and forks: of a conversation, of its fork inside
    and after the shared prefix, and one forked at its source's present."""
    store.append("rich", rich_history())
    store.append("rich", [A("a2", "t2", "r2"), O("o2", "t2"), C("c2", ["m1"], "again", 0)])
    store.append("long", long_history(pairs))
    store.append("long", [C("c", [f"a{i}" for i in range(40)], "gist", 2)])
    store.fork("long", 200, "fork1")
    store.append("fork1", [A("fa", "ft", "fr"), O("fo", "ft"), C("fc", ["fa"], "forked", 1)])
    store.fork("fork1", 100, "fork2")  # inside fork1's shared prefix: long's rows
    store.fork("fork1", store.view("fork1").version, "fork3")  # fork1's present
    store.append("fork3", [U("u3")])


def test_in_view_equals_the_view_read(store: EventStore) -> None:
    fill(store)
    for key in store.conversation_ids():
        view = store.view(key)
        asked = {event.event_id for event in store.events(key)}
        for seq in [None, *range(1, view.version + 1, 23), view.version]:
            at = store.view(key, as_of=seq)
            # Every id the lineage's log holds, every id the view holds (summaries too), and
            # one nobody holds.
            ids = sorted(asked | set(at.event_ids) | {"nobody"})
            assert store.in_view(key, ids, as_of=seq) == set(at.event_ids), (key, seq)


def test_ids_that_end_like_a_summary_id(store: EventStore) -> None:
    # in_view reads the view's summary rows only for ids ending in "-summary": an event may be
    # named so too, and is then found in the log as any other; a summary that left the view, or
    # a summary-like id nobody holds, is not in it.
    store.append("s", [U("u-summary"), A("a-summary", "t", "r"), O("o", "t"), U("u2")])
    store.append("s", [C("c1", ["a-summary", "o"], "gist", 1), U("u3")])
    store.append("s", [C("c2", ["c1-summary"], "gist again", 1)])
    asked = ["u-summary", "a-summary", "c1-summary", "c2-summary", "x-summary", "u3"]
    for seq in [None, *range(1, store.view("s").version + 1)]:
        held = set(store.view("s", as_of=seq).event_ids)
        assert store.in_view("s", asked, as_of=seq) == held & set(asked), seq
    assert store.in_view("s", asked) == {"u-summary", "c2-summary", "u3"}
