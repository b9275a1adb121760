"""Migration 0022 drops the view rows' copies of their events, online and resumably: a store
holding conversations (forks of forks, summaries, closed rows) taken down to 0021 (whose
downgrade writes every copy back from the log, as 0021 kept them) and migrated again equals
one built fresh at head from the same calls, row for row, and reads, analyst views and verify
agree. A migration killed half way (SQLite, a real SIGKILL of the migrating process) with an
append made meanwhile finishes when run again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text

from viewstore import EventStore
from viewstore.store.database.migrate import alembic_config

from ..store._helpers import LAYOUTS, A, C, O, S, U, layout_url
from ..store.test_view_rows import rich_history
from ._migrating import (
    assert_reads_replay,
    forgotten_rows,
    kill_half_way,
    killed_and_racing,
    migrated_and_fresh,
    stamped,
)
from .test_migrations import downgrade, drift, upgrade

REPO = Path(__file__).resolve().parents[2]
HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def long_history(pairs: int) -> list[dict[str, Any]]:
    events = [S(), U("u")]
    for i in range(pairs):
        events += [A(f"a{i}", f"t{i}", f"r{i}"), O(f"o{i}", f"t{i}")]
    return events


def fill(store: EventStore, pairs: int = 300) -> None:
    """Summaries, rows that left the view, and forks: of a conversation, of its fork inside
    and after the shared prefix, and one forked at its source's present."""
    store.append("rich", rich_history())
    store.append("rich", [A("a2", "t2", "r2"), O("o2", "t2"), C("c2", ["m1"], "again", 0)])
    store.append("long", long_history(pairs))
    store.append("long", [C("c", [f"a{i}" for i in range(40)], "gist", 2)])
    store.fork("long", 200, "fork1")
    store.append("fork1", [A("fa", "ft", "fr"), O("fo", "ft"), C("fc", ["fa"], "forked", 1)])
    store.fork("fork1", 100, "fork2")  # inside fork1's shared prefix: long's rows
    store.fork("fork1", store.view("fork1").version, "fork3")  # fork1's present
    store.append("fork3", [U("u3")])


def rows(store: EventStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        found = conn.execute(
            text("SELECT * FROM view_entries ORDER BY conversation_id, order_key")
        ).mappings()
        return [tuple(sorted(row.items())) for row in found]


def analysts(store: EventStore) -> list[tuple[str, ...]]:
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT h.conversation_id, h.order_key, h.event_id, h.source, h.timestamp, "
                "CAST(h.payload AS TEXT), a.position FROM view_history h "
                "LEFT JOIN attention_window a ON a.conversation_id = h.conversation_id "
                "AND a.event_id = h.event_id ORDER BY h.conversation_id, h.order_key"
            )
        )
        return [tuple(str(value) for value in row) for row in found]


def reads(store: EventStore) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in store.conversation_ids():
        view = store.view(key)
        old = store.view(key, as_of=min(view.version, 90))
        out[key] = (view.events.payloads(), old.events.payloads())
    return out


def grants(store: EventStore) -> set[tuple[str, str, str]]:
    """PostgreSQL: who may do what on the two redefined views (0008's roles and the like)."""
    if store.engine.dialect.name != "postgresql":
        return set()
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT c.relname, a.grantee::regrole::text, a.privilege_type FROM pg_class c "
                "CROSS JOIN LATERAL aclexplode(c.relacl) a "
                "WHERE c.relname IN ('attention_window', 'view_history')"
            )
        )
        return {(str(view), str(role), str(what)) for view, role, what in found}


def assert_equal_stores(migrated: EventStore, fresh: EventStore) -> None:
    assert rows(migrated) == rows(fresh)
    assert analysts(migrated) == analysts(fresh)
    assert reads(migrated) == reads(fresh)
    assert migrated.verify().ok and fresh.verify().ok
    with migrated.engine.connect() as conn:
        copies = conn.execute(
            text("SELECT count(*) FROM view_entries WHERE NOT is_summary AND payload IS NOT NULL")
        ).scalar_one()
        holders = conn.execute(
            text("SELECT count(*) FROM view_entries WHERE holder IS NOT NULL")
        ).scalar_one()
    assert copies == 0
    assert holders > 0  # the forks' rows name their sources' logs


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_migrated_store_equals_a_fresh_one(
    request: pytest.FixtureRequest, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, partitions, fresh_url = migrated_and_fresh(request, layout)
    monkeypatch.setenv("VIEWSTORE_MIGRATION_BATCH", "37")  # many batches, one cut mid-fork
    with EventStore(url) as migrated, EventStore(fresh_url) as fresh:
        migrated.create_schema(partitions=partitions)
        fill(migrated)
        downgrade(migrated, "0021")
        with migrated.engine.connect() as conn:
            before = conn.execute(
                text("SELECT count(*) FROM view_entries WHERE payload IS NULL")
            ).scalar_one()
        assert before == 0  # 0021: every row carries its copy
        granted = grants(migrated)
        assert granted or layout == "sqlite"  # 0008's roles may read them
        migrated.create_schema()
        assert grants(migrated) == granted  # the redefined views keep who may read them
        fresh.create_schema(partitions=partitions)
        fill(fresh)
        assert_equal_stores(migrated, fresh)
        if partitions is None:
            assert drift(migrated) == []


def test_a_killed_migration_finishes_when_run_again(tmp_path: Path) -> None:
    # Not verified half way: verify reads what revision 0024 added, which this store, stopped
    # before it, does not have yet (test_migration_0024 verifies one stopped half way through
    # that revision).
    killed_and_run_again(
        tmp_path,
        "0021",
        done="SELECT count(*) FROM view_entries WHERE NOT is_summary AND payload IS NULL",
        left="SELECT count(*) FROM view_entries WHERE NOT is_summary AND payload IS NOT NULL",
    )


def killed_and_run_again(
    tmp_path: Path, stop_at: str, *, done: str, left: str, verified: bool = False
) -> None:
    """A store filled at head is taken down to ``stop_at`` and migrated back up in another
    process, killed once the query ``done`` counts 100, an append sent meanwhile. Half
    migrated (the query ``left`` counts some, the version is still ``stop_at``) it reads, and
    with ``verified`` verifies; run again, it equals a store built fresh at head."""
    url, fresh_url = f"sqlite:///{tmp_path}/killed.db", f"sqlite:///{tmp_path}/fresh.db"
    with EventStore(url) as migrated:
        migrated.create_schema()
        fill(migrated, pairs=1500)
        downgrade(migrated, stop_at)
        kill_half_way(migrated, url, done, 100, lambda: migrated.append("long", [U("meanwhile")]))
        with migrated.engine.connect() as conn:
            still = conn.execute(text(left)).scalar_one()
        assert still > 0 and stamped(migrated) == stop_at  # killed half way
        assert migrated.view("long").event_ids[-1] == "meanwhile"
        if verified:
            assert migrated.verify().ok
        migrated.create_schema()
        with EventStore(fresh_url) as fresh:
            fresh.create_schema()
            fill(fresh, pairs=1500)
            fresh.append("long", [U("meanwhile")])
            assert_equal_stores(migrated, fresh)


CLEARED = "SELECT count(*) FROM view_entries WHERE NOT is_summary AND payload IS NULL"


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_a_killed_migration_run_again_while_workers_append_and_fork(
    request: pytest.FixtureRequest, layout: str, tmp_path: Path
) -> None:
    """Issue 37: run again while agent workers append, condense and fork, the migration
    deadlocked with them (PostgreSQL), and appends of condensations failed ("schema missing or
    outdated"). No call of theirs fails now, the migration ends, and the store verifies and
    reads as a replay of its log, the workers' forks included."""
    url, _ = layout_url(request, layout)
    with EventStore(url) as store:
        store.create_schema()
        fill(store, pairs=1000)
        downgrade(store, "0021")
        race = killed_and_racing(store, url, tmp_path, CLEARED)
        assert (race.migrated, race.failures) == (0, {}), race.migration_errors[-800:]
        assert min(race.calls) > 0 and race.forks  # they did work through it all
        assert stamped(store) == HEAD
        report = store.verify()
        assert report.ok, [c.problems for c in report.conversations if not c.ok]
        assert_reads_replay(store)


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_a_condensation_appended_before_0024_runs(
    request: pytest.FixtureRequest, layout: str
) -> None:
    """Revisions 0022 and 0023 add revision 0024's ``condensations.not_in_view`` in their DDL:
    this code writes it with each condensation, and appends made while their batches ran
    failed (issue 37). One appended to a store stopped at 0023 is kept when the store is taken
    down to 0021 (its rows of ``condensation_forgotten`` written from its payload, the ids
    its rows lack from the log) and up again: the store equals one built fresh."""
    url, _, fresh_url = migrated_and_fresh(request, layout)
    late = [A("a-late", "t-late", "r-late"), C("c-late", ["a-late", "a250", "ghost"], "late", 1)]
    with EventStore(url) as migrated, EventStore(fresh_url) as fresh:
        migrated.create_schema()
        fill(migrated)
        downgrade(migrated, "0021")
        upgrade(migrated, "0023")
        migrated.append("long", late)
        downgrade(migrated, "0021")
        with migrated.engine.connect() as conn:
            listed = conn.execute(
                text(
                    "SELECT f.event_id, f.was_in_view FROM condensation_forgotten f "
                    "JOIN condensations c ON c.conversation_id = f.conversation_id "
                    "AND c.seq = f.seq WHERE c.event_id = 'c-late' ORDER BY f.event_id"
                )
            )
            assert [(i, bool(w)) for i, w in listed] == [
                ("a-late", True),
                ("a250", True),
                ("ghost", False),
            ]
            no_id = "SELECT count(*) FROM view_entries WHERE event_id IS NULL OR envelope IS NULL"
            assert conn.execute(text(no_id)).scalar_one() == 0  # as revision 0021 reads them
        migrated.create_schema()
        fresh.create_schema()
        fill(fresh)
        fresh.append("long", late)
        assert forgotten_rows(migrated) == forgotten_rows(fresh)
        assert_equal_stores(migrated, fresh)
