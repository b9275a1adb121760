"""The stores ``db_url`` hands out are what migrating a new database makes: a clone of the test
process's template (tests/_pg_clone.py) grants its own roles exactly what a migrated database
grants its roles, and the template's roles nothing; a copied SQLite store has the same schema
as a migrated one."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests._pg_clone import Grant, grants
from tests.conftest import PARTITIONS
from viewstore import EventStore
from viewstore.store.database.migrate import VERSION_TABLE
from viewstore.store.database.roles import role_names

#: Its copies of the partitioned layout are checked too (tests/conftest.py).
PARTITIONED_TOO = True


def _by_kind(url: str) -> set[Grant]:
    """Each grant of the database's viewstore roles, the role named by its kind and the
    database by a placeholder, so that two databases' grants compare."""
    database = str(make_url(url).database)
    names = role_names(database)
    kinds = {role: kind for kind, role in names.items()}
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = grants(conn, list(names.values()))
    finally:
        engine.dispose()
    quoted = f'"{database}"' if f'"{database}"' in str(found) else database
    return {
        (obj.replace(quoted, "<db>"), column, privilege, grantable, kinds[role])
        for obj, column, privilege, grantable, role in found
    }


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres", "postgres_partitioned"], indirect=True)
def test_a_cloned_store_grants_its_roles_what_a_migrated_one_does(
    request: pytest.FixtureRequest, db_url: str, fresh_pg_url: str
) -> None:
    partitions = PARTITIONS if "partitioned" in request.node.callspec.params["db_url"] else None
    with EventStore(fresh_pg_url) as store:
        store.create_schema(partitions=partitions)
    migrated, cloned = _by_kind(fresh_pg_url), _by_kind(db_url)
    assert migrated, "a migrated store grants its roles something"
    assert {g[4] for g in migrated} == {"reader", "writer"}
    assert any(g[0] == "DATABASE <db>" for g in migrated)
    assert cloned == migrated
    template = request.getfixturevalue("pg_templates").templates[partitions]
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            database = str(make_url(db_url).database)
            assert grants(conn, list(role_names(template).values()), database=database) == set()
            revision = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))
            assert revision.scalar_one()
    finally:
        engine.dispose()
    with EventStore(db_url) as store:  # at head already: nothing to do
        store.create_schema()


def _schema(path: Path) -> list[tuple[str, str, str]]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        return [(kind, name, sql or "") for kind, name, sql in rows]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_copied_sqlite_store_has_the_migrated_schema(db_url: str, tmp_path: Path) -> None:
    fresh = tmp_path / "migrated.db"
    with EventStore(f"sqlite:///{fresh}") as store:
        store.create_schema()
    copied = Path(db_url.removeprefix("sqlite:///"))
    assert _schema(copied) == _schema(fresh)
    assert len(_schema(fresh)) > 10
