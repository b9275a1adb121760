"""Erasure (``store.erase``): one transaction removes a conversation from every table and
leaves its tombstone; nothing else can remove from the log; the catalogue, the feed, the
audit and appends all agree afterwards. On SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, text

from viewstore import (
    ConversationErasedError,
    ConversationNotFoundError,
    EventStore,
    InvalidArgumentError,
    MaskingRules,
    StorageError,
)
from viewstore.store.database.schema import metadata, server_conversations
from viewstore.store.records import SourceInfo

from ..ops._helpers import condensed_history, message, settled_feed


def _rows(store: EventStore, conversation: str) -> dict[str, int]:
    """How many rows of each table belong to the conversation."""
    counts = {}
    with store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            column = "id" if table.name == "conversations" else "conversation_id"
            if table.name == "tombstones":
                continue
            counts[table.name] = conn.execute(
                text(f"SELECT count(*) FROM {table.name} WHERE {column} = :c"), {"c": conversation}
            ).scalar_one()
    return counts


def test_erase_removes_every_row_and_leaves_a_tombstone(store: EventStore) -> None:
    store.append("gone", condensed_history())
    store.save_base_state("gone", "{}", at_version=store.version("gone"))
    store.hand_over("gone", "sandbox-1")  # appended above, it had no source
    store.save_conversation_info(SourceInfo("gone", "sandbox-1", title="a task"))
    store.redact("gone", store.events("gone")[0].event_id, reason="before it all goes")
    # A masked event (docs/masking.md), whose record sits in a table of its own.
    with type(store)(store.engine, masking=MaskingRules.from_toml('use = ["common"]')) as masker:
        masker.append("gone", message("m9", "key sk-proj-" + "a" * 30))
    # A store-backed agent server's row, as its lease and meta leave it; in SQL, for the
    # asyncio store has no runner methods.
    with store.engine.begin() as conn:
        conn.execute(
            insert(server_conversations).values(
                conversation_id="gone",
                meta="{}",
                created_at=datetime.now(UTC),
                updated_at=datetime.now(UTC),
                runner="server-1",
                generation=1,
            )
        )
    store.append("kept", [message("k1"), message("k2")])
    before = store.events("gone")
    assert all(_rows(store, "gone").values())  # every table holds some of it
    tombstone = store.erase("gone", reason="user asked (ticket 42)")
    assert (tombstone.events, tombstone.last_hash) == (len(before), before[-1].hash)
    assert tombstone.reason == "user asked (ticket 42)"
    assert store.tombstone("gone") == tombstone
    assert store.tombstone("kept") is None
    assert set(_rows(store, "gone").values()) == {0}
    with pytest.raises(ConversationNotFoundError):
        store.view("gone")
    assert store.conversation_ids() == ["kept"]
    assert [c.id for c in store.conversations()] == ["kept"]
    assert store.verify().ok
    assert [e.event_id for e in store.events("kept")] == ["k1", "k2"]


def test_an_erased_id_is_never_appended_to_again(store: EventStore) -> None:
    store.append("gone", [message("m1")])
    store.append("gone", [message("m2")])  # this store now holds a fast-path tail
    other = type(store)(store.engine)  # so does another store
    other.append("gone", [message("m3")])
    store.erase("gone", reason="retention")
    for writer in (store, other):
        with pytest.raises(ConversationErasedError, match="was erased"):
            writer.append("gone", [message("m4")])
    with pytest.raises(ConversationErasedError):
        store.append("gone", [message("m4")], expected_version=0)
    with pytest.raises(ConversationErasedError):
        store.erase("gone", reason="again")
    assert store.tombstone("gone") is not None and store.conversation_ids() == []


@pytest.mark.parametrize("reason", ["", "   ", "x" * 5000, "a\x00b", None])
def test_erase_needs_a_reason(store: EventStore, reason: object) -> None:
    store.append("c", [message("m1")])
    with pytest.raises(InvalidArgumentError):
        store.erase("c", reason=reason)  # type: ignore[arg-type]
    assert store.version("c") == 1


def test_erasing_an_unknown_conversation_is_a_typed_error(store: EventStore) -> None:
    with pytest.raises(ConversationNotFoundError):
        store.erase("never", reason="x")
    assert store.tombstone("never") is None


def test_the_log_still_refuses_every_other_delete_and_update(store: EventStore) -> None:
    store.append("c", [message("m1"), message("m2")])
    store.append("d", [message("d1")])
    store.erase("d", reason="x")
    for statement in (
        "DELETE FROM events WHERE conversation_id = 'c'",
        "UPDATE events SET payload = '{}' WHERE conversation_id = 'c'",
        "DELETE FROM tombstones",
        "UPDATE tombstones SET reason = 'forged'",
    ):
        with store.engine.begin() as conn, pytest.raises(Exception, match="append-only"):
            conn.execute(text(statement))
    assert store.version("c") == 2 and store.tombstone("d") is not None


def test_the_feed_after_an_erasure(store: EventStore) -> None:
    store.append("a", [message("a1"), message("a2")])
    store.append("b", [message("b1")])
    cursor = settled_feed(store, 3)[0].cursor  # after a1
    store.erase("a", reason="x")
    store.append("c", [message("c1")])
    fed = settled_feed(store, 2)
    assert [(e.conversation_id, e.event_id) for e in fed] == [("b", "b1"), ("c", "c1")]
    after = store.feed(after=cursor)
    assert [(e.conversation_id, e.event_id) for e in after] == [("b", "b1"), ("c", "c1")]


def test_a_checkpoint_that_saw_an_erased_conversation_reports_the_erasure(
    store: EventStore,
) -> None:
    store.append("a", [message("a1")])
    store.append("b", [message("b1")])
    checkpoint = store.checkpoint()
    store.erase("a", reason="gdpr")
    report = store.verify(against=checkpoint)
    assert report.ok
    (erased,) = [c for c in report.conversations if c.conversation_id == "a"]
    assert "erased" in erased.notes[0] and "gdpr" in erased.notes[0]


def test_appends_to_others_go_on_while_one_is_erased(store: EventStore) -> None:
    store.append("big", condensed_history() * 1)
    for i in range(300):
        store.append("big", [message(f"x{i}")])
    errors: list[BaseException] = []

    def write(name: str) -> None:
        try:
            for i in range(40):
                store.append(name, [message(f"{name}-{i}")])
        except BaseException as e:  # reported below, in the test thread
            errors.append(e)

    writers = [threading.Thread(target=write, args=(f"w{n}",)) for n in range(3)]
    for thread in writers:
        thread.start()
    store.erase("big", reason="x")
    for thread in writers:
        thread.join()
    assert not errors
    assert sorted(store.conversation_ids()) == ["w0", "w1", "w2"]
    assert all(store.version(f"w{n}") == 40 for n in range(3))
    assert store.verify().ok


def test_inactive_conversations_oldest_first(store: EventStore) -> None:
    for name in ("old", "older", "new"):
        store.append(name, [message(f"{name}-1")])
    store.append("old", [message("old-2")])
    store.append("new", [message("new-2")])
    now = datetime.now(UTC)
    assert store.inactive_conversations(before=now + timedelta(seconds=1)) == [
        "older",
        "old",
        "new",
    ]
    assert store.inactive_conversations(before=now - timedelta(days=1)) == []
    assert store.inactive_conversations(before=now + timedelta(seconds=1), limit=1) == ["older"]
    with pytest.raises(InvalidArgumentError):
        store.inactive_conversations(before=datetime(2020, 1, 1))
    with pytest.raises((InvalidArgumentError, StorageError)):
        store.inactive_conversations(before=now, limit=0)
