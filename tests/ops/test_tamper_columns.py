"""verify() re-derives every column the log determines and names each forged one.

The hash chain covers an event's seq, id and exact JSON only; the database owner can switch
the append-only guard off and change every other column without breaking it. Each case below
does one such edit to the conversation of ``condensed_history`` (seven events, a condensation at
seq 6) and expects verify to name the seq, the table and column, what it found and what the
log says. ``untouched`` must still verify.
"""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, create_engine, text

from viewstore import EventStore

from ..store._helpers import view_row_of
from ._helpers import condensed_history, guard_off, message

OLD = {"sqlite": "2020-01-01 00:00:00.000000", "postgresql": "2020-01-01 00:00:00+00:00"}


def _swap_positions(conn: Connection) -> list[str]:
    # Through a negative position: SQLite keeps positions unique.
    found = dict(
        conn.execute(
            text("SELECT seq, position FROM events WHERE conversation_id = 'c' AND seq IN (2, 3)")
        ).all()
    )
    statement = "UPDATE events SET position = :p WHERE conversation_id = 'c' AND seq = :s"
    return [
        statement.replace(":p", str(-1)).replace(":s", "2"),
        statement.replace(":p", str(found[2])).replace(":s", "3"),
        statement.replace(":p", str(found[3])).replace(":s", "2"),
    ]


# (case id, SQL statements, or a function returning them, and the problem verify must report)
CASES: list[tuple[str, object, str]] = [
    (
        "kind",  # flips the as-of request flag and what the feed reports
        ["UPDATE events SET kind = 'CondensationRequest' WHERE conversation_id = 'c' AND seq = 4"],
        "seq 4: events.kind is 'CondensationRequest', the payload says 'MessageEvent'",
    ),
    (
        "source",
        ["UPDATE events SET source = 'agent' WHERE conversation_id = 'c' AND seq = 1"],
        "seq 1: events.source is 'agent', the payload says 'user'",
    ),
    (
        "timestamp",
        ["UPDATE events SET timestamp = '2020-01-01' WHERE conversation_id = 'c' AND seq = 2"],
        "seq 2: events.timestamp is '2020-01-01', the payload says None",
    ),
    (
        "parent-id",
        ["UPDATE events SET parent_id = 'm1' WHERE conversation_id = 'c' AND seq = 7"],
        "seq 7: events.parent_id is 'm1', the payload says None",
    ),
    (
        "backdated-recorded-at",
        ["UPDATE events SET recorded_at = :old WHERE conversation_id = 'c' AND seq = 4"],
        "seq 4: events.recorded_at 2020-01-01T00:00:00+00:00 is earlier than seq 3's",
    ),
    (
        "conversation-updated-at",
        ["UPDATE conversations SET updated_at = :old WHERE id = 'c'"],
        "conversations.updated_at is 2020-01-01T00:00:00+00:00, its last event's recorded_at",
    ),
    (
        "feed-positions-swapped",
        _swap_positions,
        "seq 3: events.position",
    ),
    (
        "condensation-summary",
        ["UPDATE condensations SET summary = 'nothing happened' WHERE conversation_id = 'c'"],
        "seq 6: condensations.summary is 'nothing happened', the payload says 'ran ls: ok'",
    ),
    (
        "condensation-offset",
        ["UPDATE condensations SET summary_offset = 0 WHERE conversation_id = 'c'"],
        "seq 6: condensations.summary_offset is 0, the payload says 1",
    ),
    (
        "condensation-deleted",
        ["DELETE FROM condensations WHERE conversation_id = 'c'"],
        "seq 6: the Condensation has no condensations row",
    ),
    (
        "condensation-forged",  # also makes the request flag as of seq 4 go down
        [
            "INSERT INTO condensations (conversation_id, seq, event_id, summary, summary_offset) "
            "VALUES ('c', 4, 'm2', 'forged', 0)"
        ],
        "seq 4: a condensations row (event 'm2') where the log holds no Condensation",
    ),
    # condensation_forgotten is a view of the condensation's payload and its not_in_view: the
    # one column behind its rows that the chain does not cover.
    (
        "forgotten-was-in-view",
        ["UPDATE condensations SET not_in_view = '[\"o1\"]' WHERE conversation_id = 'c'"],
        "seq 6: condensation_forgotten.was_in_view of 'o1' is False, replay says True",
    ),
    (
        "not-in-view-unlisted-id",
        ["UPDATE condensations SET not_in_view = '[\"m1\"]' WHERE conversation_id = 'c'"],
        "seq 6: condensations.not_in_view is",
    ),
    (
        "not-in-view-null",
        ["UPDATE condensations SET not_in_view = NULL WHERE conversation_id = 'c'"],
        "seq 6: condensations.not_in_view is",
    ),
    (
        "conversation-counter",
        ["UPDATE conversations SET unhandled_request = TRUE WHERE id = 'c'"],
        "conversations.unhandled_request is True, replay says False",
    ),
    (
        "view-row-tool-call-id",
        [f"UPDATE view_entries SET tool_call_id = 'tc9' WHERE {view_row_of('m3')}"],
        "1 view rows differ from replay (first: event 'm3'",
    ),
]


@pytest.mark.parametrize(("tamper", "problem"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verify_names_every_forged_column(db_url: str, tamper: object, problem: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", condensed_history())
        store.append("untouched", [message("u1"), message("u2")])
        assert store.verify().ok
        engine = create_engine(db_url)
        try:
            with engine.begin() as conn, guard_off(conn):
                statements = tamper(conn) if callable(tamper) else tamper
                assert isinstance(statements, list)
                for sql in statements:
                    conn.execute(text(sql), {"old": OLD[conn.dialect.name]})
        finally:
            engine.dispose()
        report = store.verify()
        assert not report.ok
        assert any(p.startswith(f"c: {problem}") for p in report.problems), report.render()
        assert all(p.startswith("c: ") for p in report.problems)
        assert store.verify("untouched").ok


def test_a_forged_kind_changes_what_readers_see_and_verify_says_so(db_url: str) -> None:
    """Why ``kind`` matters: the as-of request flag, the log as read, the feed and the event's
    view row (which takes its kind from the log, revision 0026) read the column."""
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", condensed_history())
        assert not store.view("c", as_of=4).unhandled_condensation_request
        engine = create_engine(db_url)
        try:
            with engine.begin() as conn, guard_off(conn):
                conn.execute(
                    text(
                        "UPDATE events SET kind = 'CondensationRequest' "
                        "WHERE conversation_id = 'c' AND seq = 4"
                    )
                )
        finally:
            engine.dispose()
        assert store.view("c", as_of=4).unhandled_condensation_request
        # The log as read (and the feed, which on PostgreSQL may lag behind any open
        # transaction of the server, so it is not asserted here) reports the column.
        assert store.events("c")[3].kind == "CondensationRequest"
        assert store.verify().problems == [
            "c: seq 4: events.kind is 'CondensationRequest', the payload says 'MessageEvent'",
            "c: 1 view rows differ from replay (first: event 'm2', entered at seq 4)",
        ]


def test_many_differences_are_counted_past_the_listed_ones(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message(f"m{i}") for i in range(1, 31)])
        engine = create_engine(db_url)
        try:
            with engine.begin() as conn, guard_off(conn):
                conn.execute(text("UPDATE events SET source = 'agent'"))
        finally:
            engine.dispose()
        problems = store.verify().problems
        assert len(problems) == 22
        assert problems[0] == "c: seq 1: events.source is 'agent', the payload says 'user'"
        assert problems[-2] == "c: ... and 10 more differing event columns"
        # A view row reads its event's fields from the log (revision 0022): the analyst views
        # show the altered source too, and verify says so for the rows.
        assert problems[-1].startswith("c: 30 view rows read an event that differs")
        assert problems[-1].endswith(": source)")


FUTURE = {"sqlite": "2999-01-01 00:00:00.000000", "postgresql": "2999-01-01 00:00:00+00:00"}


def test_recorded_at_never_goes_back_after_a_writer_with_a_fast_clock(db_url: str) -> None:
    """A writer whose clock runs ahead records its append in the future; the next appends (the
    ordinary path, then the fast path) record at least that time, so the order verify checks
    holds whatever the writers' clocks."""
    with EventStore(db_url) as first:
        first.create_schema()
        first.append("c", [message("m1"), message("m2")])
    engine = create_engine(db_url)
    try:
        with engine.begin() as conn, guard_off(conn):
            future = FUTURE[conn.dialect.name]
            conn.execute(text("UPDATE events SET recorded_at = :t WHERE seq = 2"), {"t": future})
            conn.execute(text("UPDATE conversations SET updated_at = :t"), {"t": future})
    finally:
        engine.dispose()
    with EventStore(db_url) as store:
        assert store.verify().ok
        store.append("c", message("m3"))  # ordinary path: reads the row
        store.append("c", message("m4"))  # fast path: from what the last append left
        times = [e.recorded_at for e in store.events("c")]
        assert times[1].year == 2999
        assert times[1] <= times[2] <= times[3]
        assert store.verify().ok, store.verify().render()
