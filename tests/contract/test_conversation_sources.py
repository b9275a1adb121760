"""What an agent server says about a conversation (migration 0020, ``store.conversation_info``):
kept per conversation, a newer record replaces an older one and a late older one changes
nothing, erased with the conversation; created partitioned on a partitioned store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.domain.errors import (
    ConversationErasedError,
    ConversationNotFoundError,
    ConversationOwnedError,
    InvalidArgumentError,
)
from viewstore.store.records import SourceInfo

from ..ops._helpers import message

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def test_info_is_kept_and_only_a_newer_one_replaces_it(store: EventStore) -> None:
    assert store.conversation_info("c1") is None
    first = SourceInfo(
        "c1",
        "sandbox-1",
        title="Fix the build",
        execution_status="running",
        agent_kind="Agent",
        llm_model="openai/gpt-x",
        created_at=T0,
        updated_at=T0,
        tags={"team": "infra"},
    )
    store.save_conversation_info(first)
    got = store.conversation_info("c1")
    assert got is not None and got.recorded_at is not None
    assert (got.title, got.execution_status, got.llm_model, got.tags) == (
        "Fix the build",
        "running",
        "openai/gpt-x",
        {"team": "infra"},
    )
    assert (got.created_at, got.updated_at) == (T0, T0)
    later = SourceInfo("c1", "sandbox-1", execution_status="finished", updated_at=T0 + timedelta(1))
    store.save_conversation_info(later)
    late_old = SourceInfo("c1", "sandbox-1", execution_status="idle", updated_at=T0)
    store.save_conversation_info(late_old)
    got = store.conversation_info("c1")
    assert got is not None and got.execution_status == "finished" and got.title is None
    store.append("c1", [message("m1")])
    store.erase("c1", reason="retention")
    assert store.conversation_info("c1") is None


def test_the_catalogue_shows_what_the_agent_server_said(store: EventStore) -> None:
    store.append("c1", [message("m1")])
    store.save_conversation_info(
        SourceInfo(
            "c2",
            "sandbox-2",
            title="Write the docs",
            execution_status="finished",
            llm_model="openai/gpt-x",
            updated_at=T0,
        )
    )
    store.append("c2", [message("m2")])  # the source claimed c2 first, as the ingest does
    plain, fed = store.conversations()
    assert (plain.title, plain.agent_server, plain.execution_status, plain.llm_model) == (
        None,
        None,
        None,
        None,
    )
    assert (fed.title, fed.agent_server, fed.execution_status, fed.llm_model) == (
        "Write the docs",
        "sandbox-2",
        "finished",
        "openai/gpt-x",
    )
    assert fed.to_dict()["agent_server"] == "sandbox-2"
    # Paging and filters are unchanged by the join: one row per conversation, in order.
    page = store.conversation_page(order_by="updated_at", descending=True, limit=1)
    assert [r.id for r in page.conversations] == ["c2"] and page.next_cursor is not None
    assert [r.id for r in store.conversations(search="2")] == ["c2"]


def test_bad_info_is_refused(store: EventStore) -> None:
    with pytest.raises(InvalidArgumentError):
        store.save_conversation_info(SourceInfo("c1", "x" * 300))
    with pytest.raises(InvalidArgumentError):
        store.save_conversation_info(SourceInfo("c1", "s", updated_at=datetime(2026, 1, 1)))
    with pytest.raises(InvalidArgumentError):
        store.save_conversation_info(SourceInfo("..", "s"))


@pytest.mark.postgres
def test_a_partitioned_store_gets_the_table_partitioned(
    fresh_pg_url: str, store_class: Any
) -> None:
    with store_class(fresh_pg_url) as store:
        store.create_schema(partitions=4)
        with store.engine.connect() as conn:
            parts = conn.execute(
                text(
                    "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent "
                    "WHERE c.oid = to_regclass('conversation_sources')"
                )
            ).scalar_one()
        assert parts == 4
        store.save_conversation_info(SourceInfo("c1", "s", title="t"))
        info = store.conversation_info("c1")
        assert info is not None and info.title == "t"


def test_the_first_source_owns_a_conversation_and_only_it(store: EventStore) -> None:
    """Ownership (docs/fleet.md): the first claim of a conversation that holds no events wins;
    another source's claim or info is refused and changes nothing; an operator's hand-over
    moves it; a conversation holding events that no source claimed is nobody's to take."""
    store.claim_conversation("c1", "sandbox-1")
    store.claim_conversation("c1", "sandbox-1")  # again: still the owner
    store.append("c1", [message("m1")])
    with pytest.raises(ConversationOwnedError, match="belongs to agent server 'sandbox-1'"):
        store.claim_conversation("c1", "sandbox-2")
    with pytest.raises(ConversationOwnedError):
        store.save_conversation_info(SourceInfo("c1", "sandbox-2", title="evil"))
    got = store.conversation_info("c1")
    assert got is not None and (got.source, got.title) == ("sandbox-1", None)
    assert store.conversation_owner("c1") == "sandbox-1"
    assert store.hand_over("c1", "sandbox-2") == "sandbox-1"
    assert store.conversation_owner("c1") == "sandbox-2"
    with pytest.raises(ConversationOwnedError):
        store.claim_conversation("c1", "sandbox-1")
    store.append("c2", [message("m2")])  # an application's, no source
    with pytest.raises(ConversationOwnedError, match="no agent server was the source"):
        store.claim_conversation("c2", "sandbox-1")
    assert store.conversation_owner("c2") is None
    assert store.hand_over("c2", "sandbox-1") is None
    store.claim_conversation("c2", "sandbox-1")
    with pytest.raises(ConversationNotFoundError):
        store.hand_over("nobody", "sandbox-1")
    store.erase("c1", reason="retention")
    with pytest.raises(ConversationErasedError):
        store.claim_conversation("c1", "sandbox-2")
    assert store.conversation_owner("c1") is None
    with pytest.raises(InvalidArgumentError):
        store.claim_conversation("c3", "bad\x00name")
    with pytest.raises(InvalidArgumentError):
        store.claim_conversation("c3", "")
