"""A long-lived store across real PostgreSQL restarts, on a cluster of the tests' own (the
shared server is never restarted), and an append whose commit reply is lost on the wire.

A restart drops every pooled connection. The store must notice once and replace the whole
pool: the first operation afterwards may fail (``TransientStorageError``), none after it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from viewstore import (
    EventStore,
    ServerUnreachableError,
    StoredView,
    TransientStorageError,
    append_with_retry,
)
from viewstore.store.database.engine import create_engine_for

from ._cluster import Cluster
from ._helpers import condensation, message
from ._proxy import CuttingProxy

pytestmark = pytest.mark.postgres

POOL = 5
MODES = ["fast", "immediate"]
COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"  # the simple-protocol message psycopg commits with
FAST_STATEMENT = b"WITH guard AS"  # the fast path's one statement
FAST_FUNCTION = b"SELECT viewstore_append_rows("  # the same writes as one call (migration 0014)


@contextmanager
def _pooled_store(url: str) -> Iterator[EventStore]:
    engine = create_engine_for(url, pool_size=POOL, max_overflow=0)
    store = EventStore(engine)
    try:
        yield store
    finally:
        engine.dispose()


@pytest.fixture
def pooled(own_cluster_url: str) -> Iterator[EventStore]:
    """A migrated store on the own cluster whose pool holds POOL live connections, and that
    has appended to conversations "a" and "b" (so their next appends take the fast path)."""
    with _pooled_store(own_cluster_url) as store:
        store.create_schema()
        store.append("a", [message("a1")])
        store.append("b", [message("b1")])
        held = [store.engine.connect() for _ in range(POOL)]
        for conn in held:
            conn.execute(text("SELECT 1"))
        for conn in held:
            conn.close()
        assert store.engine.pool.checkedin() == POOL
        yield store


def _operations(store: EventStore) -> dict[str, Callable[[int], Any]]:
    """Each way the store reaches the server: the raw-driver read, the fast append, the
    locked append (a new conversation), SQLAlchemy's own reads."""
    return {
        "view": lambda i: store.view("a"),
        "fast append": lambda i: store.append("a", [message(f"a-{i}")]),
        "locked append": lambda i: store.append(f"new-{i}", [message("n1")]),
        "events": lambda i: store.events("b"),
        "condensation": lambda i: store.append("b", [condensation(f"b-c{i}", ["b1"])]),
        "conversations": lambda i: store.conversations(),
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("first", ["view", "fast append", "locked append", "events"])
def test_after_a_restart_at_most_the_first_operation_fails(
    pooled: EventStore, own_cluster: Cluster, mode: str, first: str
) -> None:
    operations = _operations(pooled)
    own_cluster.restart(mode)
    order = [first, *(name for name in operations if name != first)] * 2
    outcomes: list[str] = []
    for i, name in enumerate(order):
        try:
            operations[name](i)
            outcomes.append("ok")
        except TransientStorageError:
            outcomes.append("transient")
    assert outcomes[1:] == ["ok"] * (len(order) - 1), list(zip(order, outcomes, strict=True))
    assert pooled.verify().ok


@pytest.mark.parametrize("mode", MODES)
def test_append_with_retry_goes_through_a_restart(
    pooled: EventStore, own_cluster: Cluster, mode: str
) -> None:
    own_cluster.restart(mode)
    transient: list[TransientStorageError] = []
    result = append_with_retry(
        pooled, "a", lambda view: [message("after")], on_transient=lambda e, n: transient.append(e)
    )
    assert result.appended == ["after"]
    assert len(transient) <= 1
    assert [e.event_id for e in pooled.events("a")] == ["a1", "after"]


@pytest.mark.parametrize("mode", MODES)
def test_append_with_retry_while_the_server_restarts(
    pooled: EventStore, own_cluster: Cluster, mode: str
) -> None:
    """Appends keep going while the server goes down and comes back: the ones acknowledged
    are all stored, once each, in order."""
    restarted = threading.Event()

    def restart() -> None:
        own_cluster.restart(mode)
        restarted.set()

    restarter = threading.Thread(target=restart)
    acknowledged: list[str] = []
    transient: list[str] = []
    restarter.start()
    try:
        step = 0
        while not restarted.is_set() or step < 200:
            eid = f"s{step}"
            append_with_retry(
                pooled,
                "a",
                lambda view, eid=eid: [message(eid)],
                attempts=60,
                on_transient=lambda error, attempt: transient.append(type(error).__name__),
            )
            acknowledged.append(eid)
            step += 1
    finally:
        restarter.join()
    stored = [e.event_id for e in pooled.events("a")]
    assert stored == ["a1", *acknowledged]
    assert transient  # the restart was felt, and retried
    assert pooled.verify().ok
    print(
        f"\n[ops] {mode} restart under appends: {len(acknowledged)} acknowledged, all stored "
        f"once; {len(transient)} transient failures retried ({', '.join(sorted(set(transient)))})"
    )


@pytest.mark.parametrize(
    "path, marker",
    [
        pytest.param("locked", COMMIT, id="locked"),
        pytest.param("fast", FAST_STATEMENT, id="fast"),
        pytest.param("function", FAST_FUNCTION, id="function"),
    ],
)
def test_a_lost_commit_reply_is_retried_without_storing_twice(
    fresh_pg_url: str, path: str, marker: bytes
) -> None:
    """The server commits, the reply never arrives. ``decide`` picks a fresh id each time it
    is called, so a retry that decided again would store a second event."""
    target = make_url(fresh_pg_url)
    proxy = CuttingProxy(target.host or "127.0.0.1", target.port or 5432)
    via_proxy = target.set(host="127.0.0.1", port=proxy.port)
    try:
        url = via_proxy.render_as_string(hide_password=False)
        with EventStore(url, server_append=path == "function") as store:
            store.create_schema()
            if path != "locked":
                store.append("c", [message("first")])  # the next append takes the fast path
            transient: list[TransientStorageError] = []
            decided: list[str] = []

            def decide(view: StoredView | None) -> list[dict[str, Any]]:
                decided.append(uuid.uuid4().hex)
                return [message(decided[-1])]

            proxy.arm(marker)
            result = append_with_retry(
                store, "c", decide, on_transient=lambda e, n: transient.append(e)
            )
            assert proxy.cut.is_set()
            assert len(transient) == 1
            ids = [e.event_id for e in store.events("c")]
            assert ids == [*(["first"] if path != "locked" else []), decided[0]]  # once
            assert len(decided) == 1
            assert result.duplicates == decided  # the resend found it stored: a no-op
            assert store.verify().ok
    finally:
        proxy.close()


def test_a_server_shutting_down_is_transient(own_cluster: Cluster, own_cluster_url: str) -> None:
    """A smart shutdown waits for the open sessions and refuses new ones meanwhile ("the
    database system is shutting down", SQLSTATE 57P03): worth a retry, not a permanent error."""
    with EventStore(own_cluster_url) as setup:
        setup.create_schema()
    holder = create_engine(own_cluster_url, poolclass=NullPool).connect()
    holder.execute(text("SELECT 1"))
    own_cluster.stop("smart", wait=False)
    refused: TransientStorageError | None = None
    try:
        deadline = time.monotonic() + 10
        while refused is None and time.monotonic() < deadline:
            with EventStore(own_cluster_url) as store:
                try:
                    store.conversations()  # until the server has taken the signal
                except TransientStorageError as error:
                    refused = error
    finally:
        holder.close()  # the last session: the server stops now, maybe before the next line
        own_cluster.stop("fast", if_running=True)
        own_cluster.start()
    assert refused is not None
    assert "is shutting down" in str(refused)
    assert not isinstance(refused, ServerUnreachableError)
