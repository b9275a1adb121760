"""verify checks each view row as a reader reads it (issue 37): a row whose read returns no id,
another event's id or another payload is named, whether its columns or the way they are read
make it so, and rows left out of the view (read as of an older seq) too. After a rebuild the
store verifies again."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from sqlalchemy import text

from viewstore import EventStore

from ..store._helpers import M, S, U
from .test_view_rows import rich_history

# Blocking store only: the damage written through ``store.engine`` is the subject here;
# verify through the asyncio store is test_verify_rebuild.py's.
pytestmark = pytest.mark.sync_only

CID = "conv"


class Forgery(NamedTuple):
    what: str
    key: str  # the conversation
    event_id: str  # the row's event
    assignment: str  # the UPDATE's SET
    as_of: int | None  # the seq the view is read as of (None: now)
    read_as: str | None  # the id that read returns in the row's place


FORGERIES = [
    # "other" holds two events: the fork's row at seq 4 names a log without that seq.
    Forgery(
        "a fork's row names a log without its seq", "fork", "o1", "holder = 'other'", None, None
    ),
    # "other"'s event at seq 2 is u-other: the fork's row reads it in u1's place.
    Forgery("a fork's row names another log", "fork", "u1", "holder = 'other'", None, "u-other"),
    Forgery("an event's row holds another id", CID, "m1", "event_id = 'x1'", None, "x1"),
    Forgery("a left row holds another id", CID, "u1", "event_id = 'x1'", 7, "x1"),
    Forgery("a summary's row holds no id", CID, "c1-summary", "event_id = NULL", None, "c1"),
]


def row_of(event_id: str) -> str:
    """A SQL test naming the ``view_entries`` row of ``event_id``: a summary's by the id it
    holds, an event's by its seq in the log holding it (a fork's copied row: its holder's)."""
    return (
        f"(event_id = '{event_id}' OR (NOT is_summary AND seq = (SELECT e.seq FROM events e "
        f"WHERE e.event_id = '{event_id}' AND e.conversation_id = "
        "COALESCE(view_entries.holder, view_entries.conversation_id))))"
    )


@pytest.mark.parametrize("forgery", FORGERIES, ids=[forgery.what for forgery in FORGERIES])
def test_verify_names_a_row_that_reads_back_wrong(store: EventStore, forgery: Forgery) -> None:
    key, event_id, as_of = forgery.key, forgery.event_id, forgery.as_of
    store.append(CID, rich_history())
    store.append("other", [S("s-other"), U("u-other")])
    store.fork(CID, 6, "fork")  # before the condensation: u1, a1 and o1 still in view
    store.append("fork", [M("m-fork")])
    before = store.view(key, as_of=as_of)
    position = before.event_ids.index(event_id)
    assert store.verify().ok
    with store.engine.begin() as conn:
        changed = conn.execute(
            text(
                f"UPDATE view_entries SET {forgery.assignment} WHERE conversation_id = :c AND "
                f"{row_of(event_id)}"
            ),
            {"c": key},
        )
        assert changed.rowcount == 1
    # The forgery does what it says: a reader is sent that id in the event's place.
    assert store.view(key, as_of=as_of).event_ids[position] == forgery.read_as
    report = store.verify()
    assert not report.ok
    assert [c.conversation_id for c in report.conversations if not c.ok] == [key]
    assert any(repr(event_id) in problem for problem in report.problems), report.problems
    store.rebuild(key)
    assert store.verify().ok
    assert store.view(key, as_of=as_of) == before
