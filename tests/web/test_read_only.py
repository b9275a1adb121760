"""The viewer cannot write: its connections refuse writes, and on PostgreSQL it works as a
login in the database's read-only role ``viewstore_reader_<database>``, which cannot write
either."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ProgrammingError
from starlette.testclient import TestClient

from viewstore import EventStore
from viewstore.domain.errors import ViewstoreError
from viewstore.store.database.roles import role_name
from viewstore.web import create_app
from viewstore.web.readonly import VIEWER_TABLES

from ..store._helpers import M
from ._data import Browsed, populate


def test_the_viewer_store_refuses_writes(db_url: str, browsed: Browsed) -> None:
    app = create_app(db_url)
    with TestClient(app) as client:
        assert client.get(f"/c/{browsed.ranges}").status_code == 200
        with pytest.raises(ViewstoreError):
            app.state.store.append(browsed.ranges, [M("intruder")])
        with pytest.raises(ViewstoreError):
            app.state.store.rebuild(browsed.ranges)
    with EventStore(db_url) as store:
        assert store.version(browsed.ranges) == 11
        assert store.event(browsed.ranges, "intruder") is None


@pytest.fixture
def reader_url(fresh_pg_url: str, pg_admin_engine: Engine) -> Iterator[str]:
    """A login in this database's reader role on a populated database (logins are
    server-wide: a random name, dropped afterwards)."""
    with EventStore(fresh_pg_url) as store:
        populate(store)
    name = "viewer_" + secrets.token_hex(4)
    with pg_admin_engine.connect() as conn:
        reader = role_name("reader", make_url(fresh_pg_url).database or "")
        conn.execute(text(f'CREATE ROLE {name} LOGIN IN ROLE "{reader}"'))
    try:
        yield make_url(fresh_pg_url).set(username=name).render_as_string(hide_password=False)
    finally:
        owner = create_engine(fresh_pg_url, isolation_level="AUTOCOMMIT")
        with owner.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {name}"))
        owner.dispose()
        with pg_admin_engine.connect() as conn:
            conn.execute(text(f"DROP ROLE IF EXISTS {name}"))


@pytest.mark.postgres
def test_reader_role_browses_and_cannot_write(reader_url: str, fresh_pg_url: str) -> None:
    with TestClient(create_app(reader_url)) as client:
        assert "two-ranges" in client.get("/").text
        page = client.get("/c/two-ranges", params={"seq": 9}).text
        assert 'data-id="a0"' in page
        assert client.get("/c/two-ranges/condensation/10").status_code == 200
        audit = client.get("/api/c/two-ranges/audit").json()
        assert audit["verify"]["ok"] is True
    # The role itself (not just the viewer's read-only sessions) cannot write.
    engine = create_engine(reader_url)
    try:
        with engine.connect() as conn:  # migration 0009 granted exactly the viewer's tables
            for table in VIEWER_TABLES:
                conn.execute(text(f"SELECT count(*) FROM {table}"))
        for statement in (
            "INSERT INTO conversations (id) VALUES ('x')",
            "UPDATE events SET kind = 'x'",
            "DELETE FROM view_entries",
        ):
            with engine.connect() as conn, pytest.raises(ProgrammingError, match="permission"):
                conn.execute(text(statement))
    finally:
        engine.dispose()
    with EventStore(fresh_pg_url) as store:
        assert store.version("two-ranges") == 11
