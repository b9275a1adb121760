"""A store per backend shared by one module (the bad-input catalog runs dozens of cases; a
fresh database per case would cost more than the cases), and a PostgreSQL cluster of the tests'
own that they may restart."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool

from viewstore import EventStore
from viewstore.store.database.roles import role_names

from ._cluster import Cluster, server_bin


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


@pytest.fixture(scope="session")
def own_cluster() -> Iterator[Cluster]:
    """A PostgreSQL cluster these tests may restart (see _cluster.py), removed at the end."""
    bin_dir = server_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found for an own cluster")
    cluster = Cluster(bin_dir)
    try:
        cluster.create()
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def own_cluster_url(own_cluster: Cluster) -> Iterator[str]:
    """A fresh database on the own cluster, dropped afterwards."""
    # No pool: the cluster may restart in between, which would leave a pooled connection dead.
    admin = create_engine(own_cluster.url(), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    name = f"viewstore_restart_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield own_cluster.url(name)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
