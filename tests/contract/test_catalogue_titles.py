"""What a list calls a conversation (issue 39): the agent server's title, else its first user
message, read for the listed rows only; its last activity and its agent server's status."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event

from viewstore import EventStore
from viewstore.store.read.catalogue import FIRST_MESSAGE_CHARS, FIRST_MESSAGE_WITHIN
from viewstore.store.records import SourceInfo

from ..store._helpers import A, M, O, S, U, X


def _titles(store: EventStore, **options: Any) -> dict[str, tuple[str | None, str | None]]:
    return {r.id: (r.first_message, r.display_title) for r in store.conversations(**options)}


def test_the_first_user_message_names_a_conversation_without_a_title(store: EventStore) -> None:
    store.append("plain", [S(), X("x1"), U("u1", "  fix the\n\tparser  "), U("u2", "and more")])
    store.append("agent-first", [S(), M("m1", "hello"), U("u1", "ok, then")])
    store.append("silent", [S(), M("m1", "nobody asked")])
    long = "word " * 100
    store.append("long", [S(), U("u1", long)])
    assert _titles(store) == {
        "agent-first": ("ok, then", "ok, then"),
        "long": (long.strip()[: FIRST_MESSAGE_CHARS - 1] + "…",) * 2,
        "plain": ("fix the parser", "fix the parser"),  # on one line
        "silent": (None, None),
    }
    record = store.conversations(search="plain")[0]
    assert record.to_dict()["first_message"] == "fix the parser"
    assert record.to_dict()["display_title"] == "fix the parser"


def test_the_agent_servers_title_comes_first_with_its_status(store: EventStore) -> None:
    when = datetime(2026, 11, 28, 3, 54, 20, tzinfo=UTC)
    for key, title in (("fed", "Write the docs"), ("untitled", None)):
        store.save_conversation_info(
            SourceInfo(key, "sandbox-1", title=title, execution_status="running", updated_at=when)
        )
        store.append(key, [S(), U("u1", f"the request of {key}")])
    store.append("plain", [S(), U("u1", "by hand")])
    fed, plain, untitled = store.conversations()
    assert (fed.title, fed.first_message, fed.display_title) == (
        "Write the docs",
        "the request of fed",
        "Write the docs",
    )
    assert (untitled.display_title, untitled.execution_status) == (
        "the request of untitled",
        "running",
    )
    assert (plain.agent_server, plain.execution_status, plain.display_title) == (
        None,
        None,
        "by hand",
    )
    # last activity: the last append's commit, whatever the agent server's own times say
    before = plain.updated_at
    store.append("plain", [M("m1")])
    (again,) = store.conversations(search="plain")
    assert again.updated_at > before and again.updated_at.tzinfo is not None


def test_a_message_past_the_first_events_is_not_looked_for(store: EventStore) -> None:
    early = [S(), *(X(f"x{i}") for i in range(FIRST_MESSAGE_WITHIN - 2))]
    store.append("just-in", [*early, U("u1", "seq 32")])
    store.append("too-late", [*early, X("late"), U("u1", "seq 33")])
    assert _titles(store) == {"just-in": ("seq 32", "seq 32"), "too-late": (None, None)}


def test_an_image_only_or_redacted_message_gives_no_text(store: EventStore) -> None:
    image = U("u1")
    image["llm_message"]["content"] = [{"type": "image", "image_urls": ["data:x"]}]
    store.append("image", [S(), image, U("u2", "the text after")])
    store.append("secret", [S(), U("u1", "my password is hunter2")])
    store.redact("secret", "u1", reason="a secret")
    titles = _titles(store)
    assert titles["image"] == (None, None)  # the first user message, even without text
    assert "hunter2" not in str(titles["secret"])


def test_a_fork_is_named_by_the_first_message_of_its_lineage(store: EventStore) -> None:
    store.append("root", [S(), U("u1", "the root's request"), A("a1", "t1", "r1"), O("o1", "t1")])
    store.fork("root", 4, "child")
    store.append("child", [M("m1", "the child's own")])
    store.fork("child", 5, "grandchild")
    store.fork("root", 1, "early")  # before the request: its own comes later
    store.append("early", [U("u9", "the early fork's request")])
    titles = _titles(store)
    assert titles["child"][0] == titles["grandchild"][0] == "the root's request"
    assert titles["early"][0] == "the early fork's request"
    assert titles["root"][0] == "the root's request"


@contextmanager
def _statements(store: EventStore) -> Iterator[list[str]]:
    found: list[str] = []

    def capture(*args: Any) -> None:
        found.append(args[2])

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        yield found
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)


@pytest.mark.sync_only  # counts the statements on store.engine
@pytest.mark.parametrize("conversations", [3, 60])
def test_a_page_costs_the_same_statements_however_many_conversations(
    store: EventStore, conversations: int
) -> None:
    with store.begin() as conn:
        for i in range(conversations):
            store.append(f"c{i:03d}", [S(), U("u1", f"request {i}")], connection=conn)
    with _statements(store) as found:
        page = store.conversation_page(order_by="updated_at", descending=True, limit=3)
    assert [r.first_message for r in page.conversations] == [
        f"request {i}" for i in range(conversations - 1, conversations - 4, -1)
    ]
    reads = [sql for sql in found if "FROM" in sql]
    assert len(reads) == 3, reads  # the page, its first messages' seqs, their payloads
    seqs = next(sql for sql in reads if "events.seq <=" in sql)
    assert "IN" in seqs  # the page's conversations, named
