"""Migration 0026 empties the event id and kind of every event's view row, online and
resumably. Taken down to 0025, a store gets them back from the log (a fork's copied rows from
their holders' logs); migrated again it equals one built fresh at head, row for row, and
reads, analyst views and verify agree. A migration killed half way (SQLite, a real SIGKILL of
the migrating process) with an append made meanwhile is read and verified half done, and
finishes when run again."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from viewstore import EventStore

from ..store._helpers import LAYOUTS, layout_url
from ._migrating import assert_reads_replay, killed_and_racing, migrated_and_fresh, stamped
from .test_migration_0022 import HEAD, assert_equal_stores, fill, killed_and_run_again
from .test_migrations import downgrade, drift

_HELD = "SELECT count(*) FROM view_entries WHERE NOT is_summary AND event_id IS NOT NULL"
_CLEARED = "SELECT count(*) FROM view_entries WHERE NOT is_summary AND event_id IS NULL"
_EVENT_ROWS = "SELECT count(*) FROM view_entries WHERE NOT is_summary"
# Rows whose id and kind are their log row's (the holder's, for a fork's copied rows).
_AS_LOGGED = """
    SELECT count(*) FROM view_entries v JOIN events e
        ON e.conversation_id = COALESCE(v.holder, v.conversation_id) AND e.seq = v.seq
    WHERE NOT v.is_summary AND v.event_id = e.event_id AND v.kind = e.kind
"""
_SUMMARIES_NAMED = (
    "SELECT count(*) FROM view_entries WHERE is_summary AND event_id IS NOT NULL "
    "AND kind = 'CondensationSummaryEvent'"
)


def count(store: EventStore, sql: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_migrated_store_equals_a_fresh_one(
    request: pytest.FixtureRequest, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, partitions, fresh_url = migrated_and_fresh(request, layout)
    monkeypatch.setenv("VIEWSTORE_MIGRATION_BATCH", "37")
    with EventStore(url) as migrated, EventStore(fresh_url) as fresh:
        migrated.create_schema(partitions=partitions)
        fill(migrated)
        assert count(migrated, _HELD) == 0  # head writes none
        summaries = count(migrated, _SUMMARIES_NAMED)
        assert summaries > 0  # a summary's row keeps its own
        downgrade(migrated, "0025")
        assert count(migrated, _AS_LOGGED) == count(migrated, _EVENT_ROWS) > 0
        assert count(migrated, _SUMMARIES_NAMED) == summaries
        migrated.create_schema()
        assert count(migrated, _HELD) == 0
        fresh.create_schema(partitions=partitions)
        fill(fresh)
        assert_equal_stores(migrated, fresh)
        if partitions is None:
            assert drift(migrated) == []


def test_a_killed_migration_finishes_when_run_again(tmp_path: Path) -> None:
    # Verified half way: a row still holding its copies is read by them, equal to the log's.
    killed_and_run_again(
        tmp_path,
        "0025",
        done="SELECT count(*) FROM view_entries WHERE event_id IS NULL",
        left=_HELD,
        verified=True,
    )


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_a_killed_migration_run_again_while_workers_append_and_fork(
    request: pytest.FixtureRequest, layout: str, tmp_path: Path
) -> None:
    """The procedure every online revision must pass (tests/migrations/_migrating.py)."""
    url, _ = layout_url(request, layout)
    with EventStore(url) as store:
        store.create_schema()
        fill(store, pairs=1000)
        downgrade(store, "0025")
        race = killed_and_racing(store, url, tmp_path, _CLEARED)
        assert (race.migrated, race.failures) == (0, {}), race.migration_errors[-800:]
        assert min(race.calls) > 0 and race.forks
        assert stamped(store) == HEAD
        report = store.verify()
        assert report.ok, [c.problems for c in report.conversations if not c.ok]
        assert_reads_replay(store)
