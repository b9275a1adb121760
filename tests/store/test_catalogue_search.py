"""The catalogue's search reads a trigram index where PostgreSQL has pg_trgm (revision 0018):
on a new store and on one holding conversations (built concurrently, partition by partition),
the search and its count plan a scan of ``ix_conversations_id_trgm``; without the privilege to
create the extension the migration skips the index and search still answers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import event, make_url, text

from viewstore import EventStore
from viewstore.store.event_store import alembic_config

from ..migrations.test_migrations import drift
from ..store._helpers import S, U

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

pytestmark = pytest.mark.postgres
ON_POSTGRES = pytest.mark.parametrize("db_url", ["postgres", "postgres_partitioned"], indirect=True)
NAME = "ix_conversations_id_trgm"
HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def _bulk(store: EventStore, count: int) -> None:
    """``count`` conversation rows with uuid-like ids, written by SQL (the plan needs the
    rows, not their events), then vacuumed and analyzed."""
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO conversations (id, created_at, updated_at, version, "
                "unhandled_request, view_length, pending_tool_calls, in_tool_loop, "
                "last_is_action, last_hash) SELECT md5(i::text), now(), now(), 2, false, 2, "
                "'[]', false, false, 'h' FROM generate_series(1, :n) AS i"
            ),
            {"n": count},
        )
    # As autovacuum does: the statistics, and the GIN index's pending entries merged (a
    # search reads the whole pending list, so the planner prices it in).
    autocommit = store.engine.execution_options(isolation_level="AUTOCOMMIT")
    with autocommit.connect() as conn:
        conn.execute(text("VACUUM ANALYZE conversations"))


@contextmanager
def _statements(store: EventStore) -> Iterator[list[tuple[str, Any]]]:
    found: list[tuple[str, Any]] = []

    def capture(*args: Any) -> None:
        found.append((args[2], args[3]))

    event.listen(store.engine, "before_cursor_execute", capture)
    try:
        yield found
    finally:
        event.remove(store.engine, "before_cursor_execute", capture)


def _plans(store: EventStore, **search: Any) -> list[list[str]]:
    """The plans (the planner's own settings) of the search's page and of its count."""
    with _statements(store) as found:
        store.conversations(limit=50, **search)
        store.conversation_count(**search)
    plans = []
    with store.engine.connect() as conn:
        for sql, params in found:
            if "FROM conversations" in sql and not sql.startswith("EXPLAIN"):
                plans.append(
                    [str(row[0]) for row in conn.exec_driver_sql("EXPLAIN " + sql, params)]
                )
    assert len(plans) == 2
    return plans


def _indexes(store: EventStore) -> dict[str, bool]:
    """The trigram index and each partition's part of it, and whether each is valid."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.relname, i.indisvalid FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = :n OR i.indexrelid "
                "IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(:n))"
            ),
            {"n": NAME},
        )
        return {str(name): bool(valid) for name, valid in rows}


def _partitioned(store: EventStore) -> bool:
    with store.engine.connect() as conn:
        return bool(conn.execute(text("SELECT EXISTS (SELECT 1 FROM pg_inherits)")).scalar())


@ON_POSTGRES
def test_search_and_its_count_read_the_trigram_index(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        assert _indexes(store).get(NAME) is True
        _bulk(store, 20_000)
        store.append("needle-conversation", [S(), U("u")])
        for plan in _plans(store, search="e-conv"):
            # (a B-tree cannot take LIKE '%...%' as an index condition: this is the GIN index,
            # or on the partitioned layout each partition's)
            assert any("Bitmap Index Scan on" in step for step in plan), plan
            assert not [step for step in plan if "Seq Scan on conversations" in step], plan
        assert [r.id for r in store.conversations(search="e-conv")] == ["needle-conversation"]
        assert store.conversation_count(search="e-conv") == 1
        # LIKE's wildcards in the text are literal (escaped), the index or not
        assert store.conversations(search="e%c") == []
        if not _partitioned(store):
            assert drift(store) == []


def test_without_the_extension_the_migration_skips_the_index(fresh_pg_url: str) -> None:
    """A role that may create tables but not extensions (no CREATE on the database) on a
    database without pg_trgm: the store is migrated without the index, and search works."""
    role = f"vs_{uuid.uuid4().hex[:12]}"
    with EventStore(fresh_pg_url) as admin, admin.engine.begin() as conn:
        conn.execute(text("DROP EXTENSION IF EXISTS pg_trgm"))
        conn.execute(text(f"CREATE ROLE {role} LOGIN"))
        conn.execute(text(f"GRANT USAGE, CREATE ON SCHEMA public TO {role}"))
    url = make_url(fresh_pg_url).set(username=role, password=None)
    try:
        with EventStore(url.render_as_string(hide_password=False)) as store:
            store.create_schema()
            assert store.schema_revision() == HEAD
            assert _indexes(store) == {}
            store.append("a-first", [S(), U("u")])
            assert [r.id for r in store.conversations(search="firs")] == ["a-first"]
            assert drift(store) == []
    finally:
        with EventStore(fresh_pg_url) as admin, admin.engine.begin() as conn:
            conn.execute(text(f"DROP OWNED BY {role} CASCADE"))
            conn.execute(text(f"DROP ROLE {role}"))
