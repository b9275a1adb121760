"""Checkpoints catch what the hash chain alone cannot: the database owner rewriting history and
recomputing every hash, deleting the last events or a whole conversation, renaming one, or
moving its times, with every derived row fixed up so that ``verify()`` alone passes.

Each attack runs as the owner would: the append-only guard switched off, rows edited in SQL,
the chain recomputed, and ``store.rebuild()`` to make the view rows match again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, text

from viewstore import CheckpointError, EventStore
from viewstore.domain.chain import GENESIS, chain_hash

from ..cli._helpers import invoke, one_line_error
from ._helpers import condensed_history, guard_off, message

# Children first: the order in which a conversation's rows can be deleted.
#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

# condensation_forgotten is a view of the condensations (revision 0024): it goes with them.
TABLES = [
    "condensations",
    "view_entries",
    "manipulation_indices",
    "events",
    "catalogue_sizes",
]


def _rehash(conn: Connection, key: str) -> None:
    """Recompute the whole chain of ``key`` and the conversation's last hash."""
    previous = GENESIS
    rows = conn.execute(
        text("SELECT seq, event_id, payload FROM events WHERE conversation_id = :c ORDER BY seq"),
        {"c": key},
    ).all()
    for seq, event_id, payload in rows:
        previous = chain_hash(previous, seq, event_id, payload)
        conn.execute(
            text("UPDATE events SET hash = :h WHERE conversation_id = :c AND seq = :s"),
            {"h": previous, "c": key, "s": seq},
        )
    conn.execute(
        text("UPDATE conversations SET last_hash = :h WHERE id = :c"), {"h": previous, "c": key}
    )


def rewrite_a_payload(conn: Connection) -> None:
    conn.execute(
        text(
            "UPDATE events SET payload = replace(payload, 'text 2', 'text two') "
            "WHERE conversation_id = 'c' AND seq = 4"
        )
    )
    _rehash(conn, "c")


def delete_the_last_event(conn: Connection) -> None:
    conn.execute(text("DELETE FROM events WHERE conversation_id = 'c' AND seq = 7"))
    conn.execute(
        text(
            "UPDATE conversations SET updated_at = (SELECT recorded_at FROM events "
            "WHERE conversation_id = 'c' AND seq = 6) WHERE id = 'c'"
        )
    )
    _rehash(conn, "c")


def delete_the_conversation(conn: Connection) -> None:
    for table in TABLES:
        conn.execute(text(f"DELETE FROM {table} WHERE conversation_id = 'c'"))
    conn.execute(text("DELETE FROM conversations WHERE id = 'c'"))


def rename_the_conversation(conn: Connection) -> None:
    if conn.dialect.name == "sqlite":  # foreign keys are not enforced on this connection
        for table in TABLES:
            conn.execute(
                text(f"UPDATE {table} SET conversation_id = 'renamed' WHERE conversation_id = 'c'")
            )
        conn.execute(text("UPDATE conversations SET id = 'renamed' WHERE id = 'c'"))
        return
    # PostgreSQL enforces them: copy every row under the new id, then delete the old ones.
    for table in ["conversations", *reversed(TABLES)]:
        key = "id" if table == "conversations" else "conversation_id"
        columns = [
            name
            for (name,) in conn.execute(
                text(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = :t AND column_name <> :k ORDER BY ordinal_position"
                ),
                {"t": table, "k": key},
            )
        ]
        listed = ", ".join(columns)
        conn.execute(
            text(
                f"INSERT INTO {table} ({key}, {listed}) "
                f"SELECT 'renamed', {listed} FROM {table} WHERE {key} = 'c'"
            )
        )
    delete_the_conversation(conn)


def backdate_every_time(conn: Connection) -> None:
    """Move the whole conversation a day back, consistently: order and bounds still hold."""
    sqlite = conn.dialect.name == "sqlite"
    shift = "datetime({}, '-1 day')" if sqlite else "{} - interval '1 day'"
    moved = shift.format("recorded_at")
    conn.execute(text(f"UPDATE events SET recorded_at = {moved} WHERE conversation_id = 'c'"))
    conn.execute(
        text(
            f"UPDATE conversations SET created_at = {shift.format('created_at')}, "
            f"updated_at = (SELECT max(recorded_at) FROM events WHERE conversation_id = 'c') "
            "WHERE id = 'c'"
        )
    )


ATTACKS: list[tuple[str, Callable[[Connection], None], str, str]] = [
    ("rewrite-and-rehash", rewrite_a_payload, "c",
     "c: seq 7: events.hash is "),
    ("delete-last-event", delete_the_last_event, "c",
     "c: seq 7 is gone: the checkpoint of "),
    ("delete-conversation", delete_the_conversation, None,
     "c: the conversation is missing: the checkpoint of "),
    ("rename-conversation", rename_the_conversation, "renamed",
     "c: the conversation is missing: the checkpoint of "),
    ("backdate-consistently", backdate_every_time, "c",
     "c: seq 7: events.recorded_at is "),
]  # fmt: skip


def _attack(db_url: str, store: EventStore, attack: Callable[[Connection], None]) -> None:
    engine = create_engine(db_url)
    try:
        with engine.begin() as conn, guard_off(conn):
            attack(conn)
    finally:
        engine.dispose()
    store.rebuild()  # the owner makes the view rows match the rewritten log


@pytest.mark.parametrize(
    ("attack", "survivor", "problem"),
    [a[1:] for a in ATTACKS],
    ids=[a[0] for a in ATTACKS],
)
def test_a_checkpoint_catches_what_verify_alone_cannot(
    db_url: str, attack: Callable[[Connection], None], survivor: str | None, problem: str
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", condensed_history())
        store.append("untouched", [message("u1"), message("u2")])
        checkpoint = json.loads(json.dumps(store.checkpoint()))  # survives JSON
        assert store.verify(against=checkpoint).ok
        _attack(db_url, store, attack)
        # The log is consistent with itself again: verify alone has nothing to say...
        assert store.verify().ok, store.verify().render()
        if survivor is not None:
            assert store.verify(survivor).ok
        # ...but the heads no longer match the checkpoint.
        report = store.verify(against=checkpoint)
        assert not report.ok
        assert [p[: len(problem)] for p in report.problems] == [problem], report.render()
        assert store.verify("untouched", against=checkpoint).ok
        if attack is rename_the_conversation:
            assert "now under 'renamed' (renamed?)" in report.problems[0]
        # Naming the conversation that is gone checks it against the checkpoint too.
        assert store.verify("c", against=checkpoint).ok is False


def test_history_appended_after_the_checkpoint_is_fine(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message("m1"), message("m2")])
        checkpoint = store.checkpoint()
        assert checkpoint["conversations"]["c"]["seq"] == 2
        store.append("c", message("m3"))
        store.append("new", message("n1"))
        assert store.verify(against=checkpoint).ok
        again = store.checkpoint()
        assert sorted(again["conversations"]) == ["c", "new"]
        assert again["conversations"]["c"]["seq"] == 3
        assert again["digest"] != checkpoint["digest"]


def _altered(checkpoint: dict[str, object]) -> dict[str, object]:
    conversations = json.loads(json.dumps(checkpoint["conversations"]))
    conversations["c"]["seq"] = 1
    return {**checkpoint, "conversations": conversations}


BAD: list[tuple[str, Callable[[dict[str, object]], object], str]] = [
    ("not-json", lambda cp: "{", "must be JSON"),
    ("a-list", lambda cp: [cp], "not a viewstore checkpoint"),
    ("other-format", lambda cp: {**cp, "format": "x"}, "not a viewstore checkpoint"),
    ("no-digest", lambda cp: {k: v for k, v in cp.items() if k != "digest"}, "'digest'"),
    ("altered-seq", _altered, "digest does not match"),
    ("bad-head", lambda cp: {**cp, "conversations": {"c": {"seq": 1}}}, "exactly seq, hash"),
]


@pytest.mark.parametrize(("make", "message_"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_checkpoint_is_refused(
    db_url: str, make: Callable[[dict[str, object]], object], message_: str
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message("m1"), message("m2")])
        with pytest.raises(CheckpointError, match=message_):
            store.verify(against=make(store.checkpoint()))


def test_cli_checkpoint_and_verify_against(db_url: str, tmp_path: Path) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", condensed_history())
    out = tmp_path / "checkpoint.json"
    written = invoke(db_url, "checkpoint", "-o", str(out))
    assert written.exit_code == 0, written.output
    assert json.loads(out.read_text())["conversations"]["c"]["seq"] == 7
    printed = invoke(db_url, "checkpoint")
    assert (
        json.loads(printed.stdout)["conversations"] == json.loads(out.read_text())["conversations"]
    )
    assert invoke(db_url, "verify", "--against", str(out)).exit_code == 0
    with EventStore(db_url) as store:
        _attack(db_url, store, delete_the_last_event)
    assert invoke(db_url, "verify").exit_code == 0
    found = invoke(db_url, "verify", "--against", str(out))
    assert found.exit_code == 1
    assert "seq 7 is gone" in found.stdout
    for bad, what in [("missing.json", "cannot read checkpoint"), ("bad.json", "must be JSON")]:
        (tmp_path / "bad.json").write_text("{not json")
        result = invoke(db_url, "verify", "--against", str(tmp_path / bad))
        assert result.exit_code == 2
        assert what in one_line_error(result)
