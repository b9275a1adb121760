"""One database, two Alembic-managed applications: viewstore keeps its revision in its own
version table, on PostgreSQL optionally in its own schema, and neither application's
migrations see the other's. Stores made before the own version table are moved over."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from viewstore import EventStore
from viewstore.store.event_store import alembic_config

from . import _foreign_app as app
from ._helpers import A, O, S, U


def _head() -> str:
    from alembic.script import ScriptDirectory  # noqa: PLC0415

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _viewstore(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "viewstore"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIEWSTORE_")}
    return subprocess.run(
        [str(script), "--url", url, *args],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _use(store: EventStore) -> None:
    """Both append paths (the second append takes the fast path), reads and audit. (Not the
    feed: on PostgreSQL it waits for every transaction of the shared server.)"""
    store.append("c1", [S(), U("u1"), A("a1", "tc1", "r1")], expected_version=0)
    store.append("c1", [O("o1", "tc1")], expected_version=3)
    store.append("c1", [U("u2")], expected_version=4)
    assert store.view("c1").event_ids == ["S", "u1", "a1", "o1", "u2"]
    assert store.verify().ok


@pytest.mark.postgres
def test_postgres_schema_beside_an_application_with_its_own_alembic_and_events(
    fresh_pg_url: str, tmp_path: Path
) -> None:
    folder = app.write_app(tmp_path / "app")
    app.upgrade(folder, fresh_pg_url, app.FIRST)

    done = _viewstore(fresh_pg_url, "--schema", "viewstore", "init")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.strip() == f"schema is at revision {_head()}"

    with EventStore(fresh_pg_url, schema="viewstore") as store:
        assert store.schema_revision() == _head()
        _use(store)
    shown = _viewstore(fresh_pg_url, "--schema", "viewstore", "view", "c1", "--json")
    assert shown.returncode == 0, shown.stderr
    assert '"version": 5' in shown.stdout

    # The application's tables, rows and revision are as it left them ...
    assert _rows(fresh_pg_url, "SELECT id, title FROM public.events") == [(1, "launch party")]
    assert _rows(fresh_pg_url, "SELECT version_num FROM public.alembic_version") == [(app.FIRST,)]
    # ... viewstore's are in its schema, with its own version table ...
    assert _rows(fresh_pg_url, "SELECT count(*) FROM viewstore.events") == [(5,)]
    assert _rows(fresh_pg_url, "SELECT version_num FROM viewstore.viewstore_alembic_version") == [
        (_head(),)
    ]
    public = set(inspect(create_engine(_pg(fresh_pg_url))).get_table_names(schema="public"))
    assert public == {"events", "alembic_version"}
    # ... and each application migrates on without seeing the other.
    app.upgrade(folder, fresh_pg_url, app.SECOND)
    assert _rows(fresh_pg_url, "SELECT version_num FROM public.alembic_version") == [(app.SECOND,)]
    again = _viewstore(fresh_pg_url, "--schema", "viewstore", "init")
    assert again.returncode == 0, again.stderr
    with EventStore(fresh_pg_url, schema="viewstore") as store:
        assert store.view("c1").version == 5


def _pg(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.mark.postgres
def test_two_schemas_are_two_stores(fresh_pg_url: str) -> None:
    with (
        EventStore(fresh_pg_url, schema="team_a") as a,
        EventStore(fresh_pg_url, schema="team_b") as b,
    ):
        a.create_schema()
        b.create_schema()
        a.append("c", [S(), U("only-in-a")])
        b.append("c", [S()])
        assert a.view("c").event_ids == ["S", "only-in-a"]
        assert b.view("c").event_ids == ["S"]
        assert b.verify().ok


def test_sqlite_own_version_table_beside_a_foreign_alembic_version(
    sqlite_url: str, tmp_path: Path
) -> None:
    folder = app.write_app(tmp_path / "app")
    # SQLite has no schemas: the application's table may not be called events here.
    (folder / "versions" / "first.py").write_text(
        (folder / "versions" / "first.py")
        .read_text()
        .replace('"events"', '"app_events"')
        .replace("INTO events", "INTO app_events"),
        encoding="utf-8",
    )
    app.upgrade(folder, sqlite_url, app.FIRST)
    with EventStore(sqlite_url) as store:
        store.create_schema()
        assert store.schema_revision() == _head()
        _use(store)
    assert _rows(sqlite_url, "SELECT version_num FROM alembic_version") == [(app.FIRST,)]
    app.upgrade(folder, sqlite_url, app.SECOND)
    assert _rows(sqlite_url, "SELECT version_num FROM alembic_version") == [(app.SECOND,)]
    assert _rows(sqlite_url, "SELECT version_num FROM viewstore_alembic_version") == [(_head(),)]
    done = _viewstore(sqlite_url, "init")
    assert (done.returncode, done.stderr) == (0, "")


def test_a_foreign_alembic_version_with_a_revision_named_like_ours_is_left_alone(
    db_url: str,
) -> None:
    """``0027`` (viewstore's baseline) is a plausible revision id of another application's:
    viewstore's revision is only ever in its own table."""
    engine = create_engine(_pg(db_url))
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('0027')"))
    engine.dispose()
    with EventStore(db_url) as store:
        store.create_schema()
        assert store.schema_revision() == _head()
        store.append("c", [S()])
    assert _rows(db_url, "SELECT version_num FROM alembic_version") == [("0027",)]
