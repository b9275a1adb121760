"""``in_view`` answers what a read of the view answers, on conversations with summaries, with
rows that left the view, and on forks (inside their source's part, past it, at its present),
now and as of seqs all along: since revision 0026 an event is found by its seq in the lineage's
logs and a summary by the id its row holds."""

from __future__ import annotations

from viewstore import EventStore

from ..migrations.test_migration_0022 import fill
from ._helpers import A, C, O, U


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
