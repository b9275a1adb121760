"""verify() of one conversation costs the same whatever the store holds (issue 27): it never
lists the store's conversations, and the privilege question (PostgreSQL) is asked once per
call, not once per conversation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from viewstore import ConversationNotFoundError, EventStore

from ..store._helpers import S, U


@contextmanager
def statements(store: EventStore) -> Iterator[list[str]]:
    found: list[str] = []

    def capture(*args: object) -> None:
        found.append(" ".join(str(args[2]).split()))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        yield found
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)


def _fill(store: EventStore, start: int, count: int) -> None:
    with store.begin() as conn:
        for i in range(start, start + count):
            store.append(f"c{i:04d}", [S(), U(f"u{i}")], connection=conn)


def _verify_one(store: EventStore, key: str, **options: object) -> list[str]:
    with statements(store) as found:
        assert store.verify(key, **options).ok
    return found


def test_verify_of_one_conversation_never_lists_the_store(store: EventStore) -> None:
    _fill(store, 0, 3)
    few = _verify_one(store, "c0001")
    _fill(store, 3, 60)
    many = _verify_one(store, "c0001")
    assert len(many) == len(few), many
    for sql in many:
        # Every statement on the conversations table names one conversation.
        if "FROM conversations" in sql:
            assert "WHERE" in sql, sql
    # Against a checkpoint: the conversation is looked up by its id, the others are not read.
    checkpoint = store.checkpoint()
    anchored = _verify_one(store, "c0001", against=checkpoint)
    assert len(anchored) <= len(many) + 1, anchored


def test_verify_of_one_still_names_a_missing_conversation(store: EventStore) -> None:
    _fill(store, 0, 3)
    with pytest.raises(ConversationNotFoundError):
        store.verify("nope")
    checkpoint = store.checkpoint()
    with pytest.raises(ConversationNotFoundError):
        store.verify("nope", against=checkpoint)  # the checkpoint never saw it either


@pytest.mark.sync_only  # counts the statements on store.engine
def test_verify_of_everything_asks_the_privilege_once(store: EventStore) -> None:
    _fill(store, 0, 5)
    with statements(store) as found:
        report = store.verify()
    assert report.ok
    assert len(report.conversations) == 5
    asked = [sql for sql in found if "has_table_privilege" in sql]
    if store.engine.dialect.name == "postgresql":
        # once for the conversations, once for base states written before any event
        assert 1 <= len(asked) <= 2, asked
    else:
        assert asked == []
