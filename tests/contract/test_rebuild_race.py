"""``rebuild()`` locks each conversation as an append does (viewstore/store/audit/audit.py), so a
rebuild and an append to the same conversation serialise: the rebuild never writes back a
version older than an append that committed while it waited.

The interleaving is forced, not hoped for: an append stops inside its transaction (holding the
conversation's lock, its event written) through the store's crash-point hook; a rebuild starts
and, on PostgreSQL, is seen waiting for a lock in ``pg_stat_activity``; then the append commits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.store import event_store

from ..store._helpers import M, S, U

# The race is forced through the blocking store's crash-point hook and its engine's sessions.
pytestmark = pytest.mark.sync_only

CID = "conv"
WAIT = 30.0


def _waiting_for_a_lock(store: EventStore) -> bool:
    if store.engine.dialect.name != "postgresql":
        return False
    with store.engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
        )


def _until_waiting(store: EventStore) -> None:
    """On PostgreSQL: until some transaction of this database waits for a lock. SQLite has no
    such view; the rebuild waits on BEGIN IMMEDIATE, and a short pause lets it get there."""
    if store.engine.dialect.name != "postgresql":
        time.sleep(0.5)
        return
    deadline = time.monotonic() + WAIT
    while not _waiting_for_a_lock(store):
        assert time.monotonic() < deadline, "the rebuild never waited for the append's lock"
        time.sleep(0.02)


@pytest.fixture
def stores(db_url: str) -> Iterator[tuple[EventStore, EventStore, EventStore]]:
    with EventStore(db_url) as writer, EventStore(db_url) as rebuilder, EventStore(db_url) as other:
        writer.create_schema()
        yield writer, rebuilder, other


def _held_append(
    writer: EventStore, monkeypatch: pytest.MonkeyPatch, batch: list[dict[str, object]]
) -> tuple[threading.Thread, threading.Event, threading.Event, list[BaseException]]:
    """An append (ordinary path: a hook is set) that stops before its commit until released."""
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hook(point: str) -> None:
        if point == "before_commit" and threading.current_thread().name == "held-append":
            inside.set()
            assert release.wait(WAIT)

    monkeypatch.setattr(event_store, "append_hook", hook)

    def run() -> None:
        try:
            writer.append(CID, batch)
        except BaseException as error:  # reported by the test
            errors.append(error)

    thread = threading.Thread(target=run, name="held-append")
    thread.start()
    assert inside.wait(WAIT)
    return thread, inside, release, errors


def _rebuild_in_thread(
    store: EventStore, conversation: str | None
) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            store.rebuild(conversation)
        except BaseException as error:  # reported by the test
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


@pytest.mark.parametrize("scope", ["one", "all"])
def test_a_rebuild_waiting_on_an_append_keeps_the_appended_version(
    stores: tuple[EventStore, EventStore, EventStore],
    monkeypatch: pytest.MonkeyPatch,
    scope: str,
) -> None:
    writer, rebuilder, other = stores
    writer.append(CID, [S(), U("u1")])
    appending, _, release, append_errors = _held_append(writer, monkeypatch, [M("m1")])
    rebuilding, rebuild_errors = _rebuild_in_thread(rebuilder, CID if scope == "one" else None)
    _until_waiting(rebuilder)
    release.set()
    appending.join(WAIT)
    rebuilding.join(WAIT)
    assert not appending.is_alive() and not rebuilding.is_alive()
    assert append_errors == [] and rebuild_errors == []
    monkeypatch.setattr(event_store, "append_hook", None)

    assert other.version(CID) == 3 == len(other.events(CID))
    report = other.verify()
    assert report.ok, report.render()
    # Later appends work, on both paths (the writer's next one is a fast append).
    assert other.append(CID, [M("m2")]).version == 4
    assert writer.append(CID, [M("m3")]).version == 5
    assert writer.append(CID, [M("m4")]).version == 6
    assert other.verify().ok
    assert [e.event_id for e in other.events(CID)] == ["S", "u1", "m1", "m2", "m3", "m4"]


# PostgreSQL only: parametrised so that no SQLite variant exists to skip.
@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_an_append_waiting_on_a_rebuild_lands_after_it(
    stores: tuple[EventStore, EventStore, EventStore], db_url: str
) -> None:
    """The other order: a row lock held as a rebuild (or an append) holds it; a rebuild and an
    append both queue behind it; whatever order they then take, the log and version agree."""
    writer, rebuilder, other = stores
    writer.append(CID, [S(), U("u1")])
    with other.engine.connect() as holder:
        holder.execute(text("SELECT id FROM conversations WHERE id = :c FOR UPDATE"), {"c": CID})
        rebuilding, rebuild_errors = _rebuild_in_thread(rebuilder, CID)
        _until_waiting(rebuilder)
        appended: list[int] = []
        appending = threading.Thread(
            target=lambda: appended.append(writer.append(CID, [M("m1")]).version)
        )
        appending.start()  # the writer's tail is fresh: a fast append, blocked on the row
        time.sleep(0.2)
        holder.commit()
    rebuilding.join(WAIT)
    appending.join(WAIT)
    assert rebuild_errors == [] and appended == [3]
    assert other.version(CID) == 3
    assert other.verify().ok
    assert writer.append(CID, [M("m2")]).version == 4
    assert other.verify().ok
