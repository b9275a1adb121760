"""Forks made while revision 0022's batches run (issue 37). Workers go on forking during an
online migration, and a fork copies its source's rows as they are at that moment: holders
that the migration has not set yet, copies of payloads under keys its batches have passed.
Such a fork's view listed None ids, and verify said ok. Now the migration takes every fork
made meanwhile, and a read takes an id the row lacks from the log even where the row keeps
its payload's copy."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.store.database import payload_once

from ..store._helpers import layout_url
from ._migrating import (
    assert_reads_replay,
    count,
    migrate_in_background,
    stamped,
    wait_until,
)
from .test_migration_0022 import HEAD, fill
from .test_migrations import downgrade

# A fork of fork3 at its present: events 1-200 are long's, 201-203 fork1's (fill's lineage).
_INHERITED = (
    "SELECT count(*) FROM view_entries WHERE conversation_id = :c AND NOT is_summary AND seq <= 203"
)
_WRONG_HOLDER = _INHERITED + " AND holder = 'fork3'"
_COPIES = (
    "SELECT count(*) FROM view_entries WHERE conversation_id = :c AND NOT is_summary "
    "AND payload IS NOT NULL"
)


def assert_reads_right(store: EventStore, key: str) -> None:
    view = store.view(key)
    assert None not in view.event_ids
    assert view == store.replay(key)
    assert store.verify(key).ok


def test_a_fork_row_keeping_its_copy_and_no_id_reads_its_id(store: EventStore) -> None:
    """What a fork made while the copies were dropped was left with once revision 0026 had
    cleared its ids: rows holding their payloads' copies and no id. The read listed None for
    each, and verify (which built the rows' ids from the log) said ok."""
    fill(store)
    store.fork("fork1", store.version("fork1"), "late")
    with store.engine.begin() as conn:
        copied = conn.execute(
            text(
                "UPDATE view_entries SET payload = (SELECT e.payload FROM events e WHERE "
                "e.conversation_id = COALESCE(view_entries.holder, view_entries.conversation_id)"
                " AND e.seq = view_entries.seq) "
                "WHERE conversation_id = 'late' AND NOT is_summary AND event_id IS NULL"
            )
        ).rowcount
    assert copied > 20  # rows of long's, of fork1's, and the summary's neighbours
    assert_reads_right(store, "late")
    assert store.view("late").event_ids == store.replay("late").event_ids


def test_holders_a_fork_copied_unset_are_set(store: EventStore) -> None:
    """A fork of fork3 made before the migration set fork3's holders copied them unset, and
    so named fork3 for events long's and fork1's logs hold: its view read None there, and
    verify named the rows. The holders pass sets a holder that is wrong, not only one that
    is missing."""
    fill(store)
    store.fork("fork3", store.version("fork3"), "during")
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE view_entries SET holder = 'fork3' "
                "WHERE conversation_id = 'during' AND seq <= 203"
            )
        )
    inherited = count(store, _INHERITED, c="during")
    assert count(store, _WRONG_HOLDER, c="during") == inherited > 100
    assert None in store.view("during").event_ids
    assert not store.verify("during").ok
    with store.engine.connect() as conn:
        assert payload_once.set_holders(conn) >= inherited  # and the summaries copied
    assert count(store, _WRONG_HOLDER, c="during") == 0
    assert_reads_right(store, "during")


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_a_fork_made_while_the_copies_are_dropped(
    request: pytest.FixtureRequest, layout: str, tmp_path: Path
) -> None:
    """The batches walk the rows in key order. A fork whose id sorts before where they are,
    made then of a conversation they have not reached, copies rows holding their copies
    under keys already passed: the migration drops them after the walk."""
    url, _ = layout_url(request, layout)
    with EventStore(url) as store:
        store.create_schema()
        fill(store, pairs=1000)
        downgrade(store, "0021")
        migration = migrate_in_background(url, tmp_path)
        try:
            wait_until(
                store,
                "SELECT count(*) FROM view_entries WHERE conversation_id = 'long' "
                "AND NOT is_summary AND payload IS NULL",
                migration,
            )
            store.fork("rich", store.version("rich"), "aaa")  # "aaa" < "long" < "rich"
            assert count(store, _COPIES, c="aaa") > 0  # rows the walk has passed by
        finally:
            assert migration.wait(timeout=600) == 0
        assert stamped(store) == HEAD
        assert count(store, _COPIES, c="aaa") == 0
        assert_reads_right(store, "aaa")
        assert store.verify().ok
        assert_reads_replay(store)


def test_a_fork_made_after_the_forks_were_listed(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """PostgreSQL: the holders pass locks each fork's row before it sets its rows' holders,
    as an append does. Held up at fork1 (this test holds fork1's row), it has listed the
    forks already when fork3, which it has not reached, is forked: the fork copies fork3's
    holders unset, and the pass, listing the forks again, sets them."""
    url, _ = layout_url(request, "postgres")
    with EventStore(url) as store:
        store.create_schema()
        fill(store, pairs=300)
        downgrade(store, "0021")
        with store.engine.connect() as blocker:
            blocker.execute(text("SELECT id FROM conversations WHERE id = 'fork1' FOR UPDATE"))
            migration = migrate_in_background(url, tmp_path)
            try:
                wait_until(
                    store,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE '%FROM conversations%UPDATE'",
                    migration,
                )
                store.fork("fork3", store.version("fork3"), "during")
                assert count(store, _WRONG_HOLDER, c="during") > 100
            finally:
                blocker.rollback()
                assert migration.wait(timeout=600) == 0
        assert count(store, _WRONG_HOLDER, c="during") == 0
        assert_reads_right(store, "during")
        assert store.verify().ok
