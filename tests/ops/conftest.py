"""A store per backend shared by one module (the bad-input catalog runs dozens of cases; a
fresh database per case would cost more than the cases)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from viewstore import EventStore
from viewstore.store.roles import role_names


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def module_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EventStore]:
    """A migrated store on a database of each backend, shared by the tests of one module."""
    if request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("catalog") / "store.db"
        with EventStore(f"sqlite:///{path}") as store:
            store.create_schema()
            yield store
        return
    admin: Engine = request.getfixturevalue("pg_admin_engine")
    server_url: str = request.getfixturevalue("pg_server_url")
    name = f"viewstore_test_ops_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        with EventStore(url) as store:
            store.create_schema()
            yield store
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            for role in role_names(name).values():
                conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
