"""A full database on SQLite is reported as what it is, on both append paths: the fast path's
transaction is rolled back only if SQLite has not already done so itself, and a failed rollback
never replaces the error that says why (viewstore/store/append/fast_path.py).

The database is made genuinely full with SQLite's ``max_page_count`` (set on every connection
the store opens), so each write past the limit fails with SQLITE_FULL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from viewstore import EventStore, StorageError

from ._helpers import M, S, U

CID = "conv"
BIG = 400_000  # characters of payload: many pages more than the limit leaves free


def _big(eid: str) -> dict[str, Any]:
    event_ = M(eid)
    event_["padding"] = "p" * BIG
    return event_


def _full_store(url: str) -> EventStore:
    """A store on ``url`` whose every connection lets the file grow by a few pages only."""
    store = EventStore(url)
    with store.engine.connect() as conn:
        pages = conn.execute(text("PRAGMA page_count")).scalar_one()
    store.engine.dispose()
    limit = pages + 8

    @event.listens_for(store.engine, "connect")
    def _limit(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {limit}")

    return store


def _url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'full.db'}"
    with EventStore(url) as store:
        store.create_schema()
    return url


@pytest.mark.parametrize("path", ["ordinary", "fast"])
def test_a_full_database_is_reported_as_full_on_both_paths(tmp_path: Path, path: str) -> None:
    url = _url(tmp_path)
    with _full_store(url) as store:
        store.append(CID, [S(), U("u")])  # small: fits; gives the store its tail
        if path == "ordinary":
            store._tails.clear()
        else:
            assert store._tails.get(CID) is not None
        with pytest.raises(StorageError) as error:
            store.append(CID, [_big("big")])
        message = str(error.value)
        assert "database or disk is full" in message, message
        assert "cannot rollback" not in message
        assert "cannot rollback" not in repr(error.value.__cause__)
        assert store.version(CID) == 2
        assert store.verify().ok
        assert store.append(CID, [M("m")]).version == 3  # room for a small one still
    with EventStore(url) as unlimited:  # once there is room again, the big one goes in
        assert unlimited.append(CID, [_big("big")]).version == 4
        assert unlimited.verify().ok
