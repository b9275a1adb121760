"""``in_view`` answers what a read of the view answers, on conversations with summaries, with
rows that left the view, and on forks (inside their source's part, past it, at its present),
now and as of seqs all along: since revision 0026 an event is found by its seq in the lineage's
logs and a summary by the id its row holds."""

from __future__ import annotations

from viewstore import EventStore

from .test_migration_0022 import fill


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
