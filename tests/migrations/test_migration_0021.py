"""Migration 0021 adds the feed's wake-up trigger on PostgreSQL (on the partitioned log of a
store partitioned before it), changes nothing on SQLite, and goes back down cleanly."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.store.database import migrate

from ..store._helpers import LAYOUTS, layout_url
from .test_migrations import downgrade

_FOUND = (
    "SELECT c.relkind::text, t.tgtype::int FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "WHERE t.tgname = 'events_feed_notify'"
)
_STATEMENT_AFTER_INSERT = 4  # tgtype: INSERT (4); no ROW bit (1), no BEFORE bit (2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_trigger_comes_and_goes_with_the_revision(
    request: pytest.FixtureRequest, layout: str
) -> None:
    url, partitions = layout_url(request, layout)
    with EventStore(url) as store:
        # No rows: this code writes the rows of revision 0022's shape (tests/ops/test_follow.py
        # has the trigger at work).
        migrate.upgrade(store.engine, None, "0020", partitions=partitions)
        assert store._follow_target() is None  # nothing notifies yet: a follower polls
        migrate.upgrade(store.engine, None, "0021", partitions=partitions)
        assert store.schema_revision() == "0021"
        target = store._follow_target()
        if layout == "sqlite":
            assert target is None
            with store.engine.connect() as conn:
                names = conn.execute(text("SELECT name FROM sqlite_master")).scalars().all()
            assert not any("notify" in name for name in names)
            return
        assert target is not None and target.channel == "viewstore_feed_public"
        with store.engine.connect() as conn:
            found = conn.execute(text(_FOUND)).all()
        # on the log itself: a partitioned table ('p') where partitioned, not on its partitions
        assert found == [("p" if partitions else "r", _STATEMENT_AFTER_INSERT)]
        downgrade(store, "0020")
        assert store._follow_target() is None
        with store.engine.connect() as conn:
            assert conn.execute(text(_FOUND)).all() == []
            gone = "SELECT to_regproc('viewstore_feed_notify') IS NULL"
            assert conn.execute(text(gone)).scalar_one()
