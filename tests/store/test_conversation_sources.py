"""What an agent server says about a conversation (migration 0020, ``store.conversation_info``):
kept per conversation, a newer record replaces an older one and a late older one changes
nothing, erased with the conversation; created partitioned on a partitioned store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.errors import InvalidArgumentError
from viewstore.store.adapters.source_info import SourceInfo
from viewstore.store.database import migrate

from ..ops._helpers import message

PARTITIONED_TOO = True
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


def test_bad_info_is_refused(store: EventStore) -> None:
    with pytest.raises(InvalidArgumentError):
        store.save_conversation_info(SourceInfo("c1", "x" * 300))
    with pytest.raises(InvalidArgumentError):
        store.save_conversation_info(SourceInfo("c1", "s", updated_at=datetime(2026, 1, 1)))
    with pytest.raises(InvalidArgumentError):
        store.save_conversation_info(SourceInfo("..", "s"))


@pytest.mark.postgres
def test_a_partitioned_store_gets_the_table_partitioned(fresh_pg_url: str) -> None:
    with EventStore(fresh_pg_url) as store:
        migrate.upgrade(store.engine, None, "0019", partitions=4)
        store.create_schema()
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
