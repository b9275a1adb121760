"""The log is append-only in the database itself, and verify() finds direct tampering.

The tamper cases switch the guard off the way an attacker with table rights would (PostgreSQL:
``ALTER TABLE events DISABLE TRIGGER USER``; SQLite: ``DROP TRIGGER``), edit rows in SQL,
and switch it back on (SQLite: the triggers are recreated from their stored SQL, i.e. the SQL of
migration 0001).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.exc import DBAPIError

from viewstore import EventStore

from ._helpers import guard_off, is_postgres, message

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True


def _edit_payload(conn: Connection) -> None:
    conn.execute(
        text(
            "UPDATE events SET payload = replace(payload, 'text 3', 'text 3!') "
            "WHERE conversation_id = 'c' AND seq = 3"
        )
    )


def _swap_seqs(conn: Connection) -> None:
    for old, new in [(4, -4), (5, 4), (-4, 5)]:
        conn.execute(
            text("UPDATE events SET seq = :new WHERE conversation_id = 'c' AND seq = :old"),
            {"new": new, "old": old},
        )


def _delete_event(conn: Connection) -> None:
    conn.execute(text("DELETE FROM events WHERE conversation_id = 'c' AND seq = 2"))


def _rehash_edit(conn: Connection) -> None:
    """An edit that also rewrites the row's own hash (but not the later ones)."""
    from viewstore.domain.chain import chain_hash  # noqa: PLC0415

    prev = conn.execute(
        text("SELECT hash FROM events WHERE conversation_id = 'c' AND seq = 2")
    ).scalar_one()
    event_id, payload = conn.execute(
        text("SELECT event_id, payload FROM events WHERE conversation_id = 'c' AND seq = 3")
    ).one()
    payload = payload.replace("text 3", "text three")
    conn.execute(
        text("UPDATE events SET payload = :p, hash = :h WHERE conversation_id = 'c' AND seq = 3"),
        {"p": payload, "h": chain_hash(prev, 3, event_id, payload)},
    )


TAMPERS: list[tuple[str, Callable[[Connection], None], str]] = [
    ("edit a payload", _edit_payload, "seq 3"),
    ("swap two events' seqs", _swap_seqs, "seq 4"),
    ("delete an event", _delete_event, "seq 2"),
    ("edit a payload and its own hash", _rehash_edit, "seq 4"),
]


@pytest.mark.parametrize(
    ("tamper", "first_seq"), [(t[1], t[2]) for t in TAMPERS], ids=[t[0] for t in TAMPERS]
)
def test_verify_names_the_first_altered_seq(
    db_url: str, tamper: Callable[[Connection], None], first_seq: str
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message(f"m{i}", f"text {i}") for i in range(1, 7)])
        store.append("untouched", message("u1"))
        assert store.verify().ok
        engine = create_engine(db_url)
        with engine.begin() as conn, guard_off(conn):
            tamper(conn)
        report = store.verify()
        assert not report.ok
        problems = report.problems
        assert problems[0].startswith("c: ")
        assert first_seq in problems[0], problems
        assert store.verify("untouched").ok
        # the guard is back on
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text("DELETE FROM events WHERE conversation_id = 'untouched'"))
        engine.dispose()


REFUSED = [
    "UPDATE events SET payload = '{}' WHERE seq = 1",
    "UPDATE events SET seq = seq + 100",
    "UPDATE events SET hash = hash",
    "DELETE FROM events WHERE seq = 2",
    "DELETE FROM events",
]


def test_update_and_delete_are_refused_by_the_database(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message("m1"), message("m2")])
        engine = create_engine(db_url)
        statements = list(REFUSED)
        if is_postgres(db_url):
            statements.append("TRUNCATE events CASCADE")
        for sql in statements:
            with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
                conn.execute(text(sql))
        # still intact; inserts (appends) still work
        assert [e.event_id for e in store.events("c")] == ["m1", "m2"]
        store.append("c", message("m3"))
        assert store.verify().ok
        engine.dispose()
