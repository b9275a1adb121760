"""The suite's own matrix: each test's store is of the flavour its id names, on its layout."""

from __future__ import annotations

from typing import Any

import pytest

from viewstore import AsyncEventStore, EventStore


def test_the_store_is_of_its_flavour(
    store: EventStore, store_class: Any, request: pytest.FixtureRequest
) -> None:
    assert type(store) is store_class
    flavour = request.node.callspec.params["store_class"]
    if flavour == "async":
        assert isinstance(store.async_store, AsyncEventStore)  # type: ignore[attr-defined]
    else:
        assert store_class is EventStore
    layout = request.node.callspec.params["db_url"]
    assert store.engine.dialect.name == ("sqlite" if layout == "sqlite" else "postgresql")
    if layout == "postgres_partitioned":
        with store.engine.connect() as conn:
            found = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_partitioned_table p "
                "JOIN pg_class c ON c.oid = p.partrelid WHERE c.relname = 'events'"
            ).scalar_one()
        assert found == 1
