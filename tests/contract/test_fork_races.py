"""Forks racing the writes of the conversation they copy from (issue 26): the fork locks the
conversation that holds its fork seq, not only the one it was named by."""

from __future__ import annotations

import time

from viewstore import EventStore

from ..ops._helpers import message
from ..store._helpers import appending_meanwhile, triple

ROUNDS = 60


def test_a_fork_of_a_fork_inside_its_prefix_races_appends_to_the_ancestor(
    store: EventStore, sweep_step: int
) -> None:
    """``b`` forks ``a`` at its head; ``c`` forks ``b`` at that same seq, inside ``b``'s shared
    prefix, so ``c`` copies ``a``'s rows while another writer appends to ``a``. Before the fix
    ``c`` sometimes took ``a``'s version before an append and its rows after it: index rows
    that verify named, and a duplicate key on ``c``'s next append."""
    store.append("a", [message("m0")])

    def append(other: EventStore, i: int) -> None:
        other.append("a", [message(f"m{i + 1}")])
        time.sleep(0.002)  # often enough to land inside a fork, not so often to outrun it

    # The race is between statements that every flavour and layout shares: the sync store on
    # SQLite and PostgreSQL runs every round, the others a third (tests/conftest.py).
    rounds = ROUNDS // sweep_step
    with appending_meanwhile(store, append, 1_000_000):
        for n in range(rounds):
            head = store.version("a")
            store.fork("a", head, f"b{n}")
            store.fork(f"b{n}", head, f"c{n}")
            store.append(f"c{n}", [message(f"c{n}-next")])
    for n in range(rounds):
        conv = f"c{n}"
        assert triple(store.view(conv)) == triple(store.replay(conv)), conv
        report = store.verify(conv)
        assert report.ok, report.problems
