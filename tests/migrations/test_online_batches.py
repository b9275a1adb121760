"""``online.in_batches``, the walk a later revision makes over a table in use
(migrations/online.py): every row reached once in key order, a batch per transaction, appends
going on between batches, and a run killed half way finishing when run again."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from viewstore._migrations import online

from viewstore import EventStore

from ..store._helpers import A, O, S, U

_CLEAR = "UPDATE view_entries SET envelope = NULL WHERE envelope IS NOT NULL AND {range}"
_LEFT = "SELECT count(*) FROM view_entries WHERE envelope IS NOT NULL"


class Killed(Exception):
    """Stands for SIGKILL: the walk stops between two committed batches."""


def _count(store: EventStore, sql: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def test_a_walk_killed_half_way_finishes_when_run_again(store: EventStore) -> None:
    for n in range(6):
        store.append(f"c{n}", [S(), U(f"u{n}"), A(f"a{n}", f"t{n}", f"r{n}"), O(f"o{n}", f"t{n}")])
    with store.engine.begin() as conn:  # what a revision would clear: a value on every row
        rows = conn.execute(text("UPDATE view_entries SET envelope = 'x'")).rowcount
    assert rows == 24

    def kill_at_third(batches: int) -> None:
        store.append("c0", [U(f"meanwhile-{batches}")])  # an append between two batches
        if batches == 3:
            raise Killed

    with store.engine.connect() as conn, pytest.raises(Killed):
        online.in_batches(
            conn, "view_entries", ("conversation_id", "order_key"), _CLEAR, batch=5,
            after_each=kill_at_third,
        )  # fmt: skip
    assert _count(store, _LEFT) == 24 - 15  # three batches of five committed, the rest not
    with store.engine.connect() as conn:
        again = online.in_batches(
            conn, "view_entries", ("conversation_id", "order_key"), _CLEAR, batch=5
        )
    assert _count(store, _LEFT) == 0
    assert again == 6  # 27 rows now (three appended meanwhile): five batches of five, the rest
    assert store.verify().ok
    assert store.view("c0").event_ids[-3:] == ["meanwhile-1", "meanwhile-2", "meanwhile-3"]
