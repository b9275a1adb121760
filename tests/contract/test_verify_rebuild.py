"""verify() compares every materialized row with a pure replay and names what differs;
rebuild() rewrites the rows from the log."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from viewstore import EventStore

from ..store._helpers import A, C, M, O, R, S, U, triple, view_row_of

CID = "conv"


@pytest.fixture
def filled(store: EventStore) -> EventStore:
    store.append(CID, [S(), U("u1"), A("a1", "t1", "r1"), O("o1", "t1"), M("m1")])
    store.append(CID, [R("req"), C("c1", ["u1", "a1", "o1"], "summary", 1), U("u2")])
    store.append("other", [S(), U("u1")])
    return store


def corrupt(store: EventStore, sql: str) -> None:
    with store.engine.begin() as conn:
        assert conn.execute(text(sql)).rowcount == 1


def test_verify_is_ok_on_healthy_data(filled: EventStore) -> None:
    report = filled.verify()
    assert report.ok
    assert report.problems == []
    assert sorted(r.conversation_id for r in report.conversations) == [CID, "other"]
    assert "2/2 conversations verified" in report.render()
    assert filled.verify(CID).ok


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        (  # an entry that never left the view
            f"UPDATE view_entries SET left_seq = NULL WHERE conversation_id = '{CID}' "
            f"AND {view_row_of('u1')}",
            "view rows differ from replay",
        ),
        (  # another event shown in its place
            f"UPDATE view_entries SET event_id = 'forged' WHERE conversation_id = '{CID}' "
            f"AND {view_row_of('m1')}",
            "view rows differ from replay",
        ),
        (  # an index that is not one
            f"UPDATE manipulation_indices SET position = 99 WHERE conversation_id = '{CID}' "
            "AND position = 0",
            "manipulation-index rows differ from replay",
        ),
        (  # the carried state the next append builds on
            f"UPDATE conversations SET view_length = 42 WHERE id = '{CID}'",
            "carried projection state differs",
        ),
    ],
    ids=["entry-lifetime", "entry-id", "index", "state"],
)
def test_verify_names_the_corruption_and_rebuild_fixes_it(
    filled: EventStore, sql: str, problem: str
) -> None:
    healthy = triple(filled.view(CID))
    corrupt(filled, sql)
    report = filled.verify()
    assert not report.ok
    assert [r.conversation_id for r in report.conversations if not r.ok] == [CID]
    assert any(problem in p for p in report.problems), report.render()
    assert all(p.startswith(f"{CID}: ") for p in report.problems)
    assert "PROBLEMS" in report.render()

    assert filled.rebuild(CID) == 1
    assert filled.verify().ok
    assert triple(filled.view(CID)) == healthy == triple(filled.replay(CID))
    for seq in range(filled.version(CID) + 1):
        assert triple(filled.view(CID, as_of=seq)) == triple(filled.replay(CID, as_of=seq))
    # Appends keep working on the rebuilt rows.
    filled.append(CID, [A("a2", "t2", "r2"), O("o2", "t2")])
    assert filled.verify().ok


def test_rebuild_everything_is_idempotent(filled: EventStore) -> None:
    before = {cid: triple(filled.view(cid)) for cid in filled.conversation_ids()}
    assert filled.rebuild() == 2
    assert filled.rebuild() == 2
    assert {cid: triple(filled.view(cid)) for cid in filled.conversation_ids()} == before
    assert filled.verify().ok


def test_verify_notes_where_resume_differs(store: EventStore) -> None:
    """A tail orphan action: not a fault of the rows, but the resume view would drop it."""
    store.append(CID, [S(), U("u1"), A("a1", "t1", "r1")])
    report = store.verify(CID)
    assert report.ok
    (conversation,) = report.conversations
    assert conversation.notes, report.render()
