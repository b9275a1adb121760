"""The contract suite: the behaviour every store shares, whatever it runs on.

Every test here runs on each layout (``db_url``: SQLite, PostgreSQL, PostgreSQL with its tables
hash-partitioned, tests/conftest.py) and through each API flavour (``store_class``): the
blocking ``EventStore``, and ``AsyncEventStore`` through a blocking face of it
(tests/_async_store.py), whose methods run as tasks of one event loop. A test gets its store
from the ``store`` fixture (migrated, of its own), and makes any other store of the same kind
with ``store_class`` (``store_class(db_url)``, ``type(store)(store.engine)``), so its
signature says what it runs on. A test that only holds for the blocking store (it watches the
store's engine, or uses a part the asyncio store does not offer) is marked ``sync_only``, or
its whole module is (``pytestmark``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from viewstore import EventStore

FLAVOURS = ("sync", "async")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_class" in metafunc.fixturenames:
        sync_only = metafunc.definition.get_closest_marker("sync_only") is not None
        metafunc.parametrize("store_class", FLAVOURS[:1] if sync_only else FLAVOURS, indirect=True)


@pytest.fixture
def store_class(request: pytest.FixtureRequest) -> Any:
    """``EventStore``, or (``async``) the blocking face of ``AsyncEventStore``."""
    if request.param == "sync":
        return EventStore
    from tests._async_store import BlockingAsyncStore  # noqa: PLC0415

    return BlockingAsyncStore


@pytest.fixture
def store(db_url: str, store_class: Any) -> Iterator[EventStore]:
    """A store of this test's flavour on a fresh database of its layout, at head."""
    with store_class(db_url) as opened:
        opened.create_schema()
        yield opened


@pytest.fixture
def sweep_step(request: pytest.FixtureRequest, store_class: Any) -> int:
    """How far apart to take the cases of a sweep over every reference vector: each one on the
    blocking store over SQLite and plain PostgreSQL; every third through the asyncio store or
    on the partitioned layout. Those run the blocking store's statements, one through another
    driver (viewstore/aio/store.py), one on other tables (docs/distribution.md): a third of
    the cases reach their own code, and the whole sweep on them took minutes of the suite."""
    callspec = getattr(request.node, "callspec", None)
    layout = callspec.params.get("db_url") if callspec is not None else None
    return 3 if store_class is not EventStore or layout == "postgres_partitioned" else 1
