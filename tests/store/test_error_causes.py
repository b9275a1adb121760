"""Errors that name the real cause: a missing database, an unknown role, an unreachable server,
a database viewstore does not run on, a schema revision it does not know. Each is a precise
``ViewstoreError``, never a driver exception, and never "run `viewstore init`" when the schema
is not the problem. (A wrong password needs a server that asks for one: tests/ops/test_login.py.)
"""

from __future__ import annotations

import re
import secrets
import socket
import sys
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from viewstore import (
    AuthenticationError,
    DatabaseNotFoundError,
    EventStore,
    SchemaMismatchError,
    ServerUnreachableError,
    TransientStorageError,
    UnsupportedDatabaseError,
)
from viewstore import create_engine as viewstore_engine

from ._helpers import S, U, set_schema_revision


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port  # closed again: nothing listens there


@pytest.mark.postgres
def test_a_missing_postgresql_database_is_named(pg_server_url: str) -> None:
    name = f"viewstore_missing_{secrets.token_hex(4)}"
    url = make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    with EventStore(url) as store:
        calls = (store.create_schema, lambda: store.view("c"), lambda: store.append("c", [S()]))
        for call in calls:
            with pytest.raises(DatabaseNotFoundError) as raised:
                call()
            message = str(raised.value)
            assert f'database "{name}" does not exist' in message
            assert "create it first" in message
            assert "create_schema" not in message


def test_a_sqlite_file_in_a_missing_folder_cannot_be_opened(tmp_path: Any) -> None:
    with EventStore(f"sqlite:///{tmp_path / 'no-such-folder' / 'store.db'}") as store:
        with pytest.raises(DatabaseNotFoundError, match="cannot open the SQLite database file"):
            store.create_schema()
        with pytest.raises(DatabaseNotFoundError):
            store.view("c")


@pytest.mark.postgres
def test_an_unknown_role_is_named(pg_server_url: str) -> None:
    role = f"viewstore_no_role_{secrets.token_hex(4)}"
    url = make_url(pg_server_url).set(username=role, password=None)
    with EventStore(url.render_as_string(hide_password=False)) as store:
        with pytest.raises(AuthenticationError, match=role):
            store.create_schema()
        with pytest.raises(AuthenticationError, match=role):
            store.view("c")


def test_a_port_nobody_listens_on_is_unreachable() -> None:
    port = _unused_port()
    with EventStore(f"postgresql://postgres@127.0.0.1:{port}/test") as store:
        refused = re.escape(f"127.0.0.1:{port}: Connection refused")
        with pytest.raises(ServerUnreachableError, match=refused):
            store.create_schema()
        with pytest.raises(ServerUnreachableError):
            store.append("c", [S()])
    # The server may only be restarting: worth a retry, as append_with_retry does.
    assert issubclass(ServerUnreachableError, TransientStorageError)


def test_an_unknown_host_is_unreachable() -> None:
    host = "viewstore-no-such-host.invalid"
    with (
        EventStore(f"postgresql://postgres@{host}/test") as store,
        pytest.raises(ServerUnreachableError, match=re.escape(host)),
    ):
        store.view("c")


@pytest.mark.parametrize(
    "url",
    [
        "mysql://root@127.0.0.1/test",  # its driver is not even installed
        "mysql+pymysql://root@127.0.0.1/test",
        "postgresql+asyncpg://postgres@127.0.0.1/test",
        "postgresql+psycopg2://postgres@127.0.0.1/test",
        "sqlite+aiosqlite:///store.db",
        "nosuchdb://x",
    ],
)
def test_a_database_viewstore_does_not_run_on_is_refused_up_front(url: str) -> None:
    with pytest.raises(UnsupportedDatabaseError, match="viewstore does not run on") as raised:
        EventStore(url)
    assert isinstance(raised.value, ValueError)


def test_a_driver_that_is_not_installed_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what Python does for a missing module
    missing = re.escape("the driver for 'postgresql+psycopg' URLs is not installed")
    with pytest.raises(UnsupportedDatabaseError, match=missing):
        EventStore("postgresql://postgres@127.0.0.1/test")


def test_an_engine_viewstore_does_not_run_on_is_refused(tmp_path: Any) -> None:
    # The default SQLite driver, spelled out: accepted (in an engine with the store's settings,
    # tests/store/test_engines.py).
    engine = viewstore_engine(f"sqlite+pysqlite:///{tmp_path / 'ok.db'}")
    EventStore(engine).close()
    engine.dispose()
    other = create_engine("postgresql+psycopg_async://postgres@127.0.0.1/test")
    with pytest.raises(UnsupportedDatabaseError):
        EventStore(other)
    other.dispose()


def test_a_bad_sqlite_timeout_is_an_invalid_argument(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be a number of seconds"):
        EventStore(f"sqlite:///{tmp_path / 'store.db'}?timeout=soon")


# -- schema revisions ------------------------------------------------------------------------


def _migrated(url: str) -> EventStore:
    store = EventStore(url)
    store.create_schema()
    store.append("c", [S(), U("u1")])
    return store


def test_a_foreign_revision_is_named_and_nothing_is_migrated(db_url: str) -> None:
    with _migrated(db_url) as store:
        set_schema_revision(db_url, "3fa2c1d9e8b7")
        with pytest.raises(SchemaMismatchError, match="'3fa2c1d9e8b7', which is not a viewstore"):
            store.create_schema()
        assert store.schema_revision() == "3fa2c1d9e8b7"  # untouched


def test_a_schema_newer_than_the_code_says_so(db_url: str) -> None:
    with _migrated(db_url) as store:
        set_schema_revision(db_url, "9999")
        with pytest.raises(SchemaMismatchError, match="revision 9999, newer than this viewstore"):
            store.create_schema()
        assert store.schema_revision() == "9999"


def test_a_version_table_with_two_heads_is_not_viewstores(db_url: str) -> None:
    with _migrated(db_url) as store:
        set_schema_revision(db_url, "aaaa1111", "bbbb2222")
        with pytest.raises(SchemaMismatchError, match="not viewstore's"):
            store.schema_revision()
        with pytest.raises(SchemaMismatchError):
            store.create_schema()


def test_a_known_older_revision_still_migrates(db_url: str) -> None:
    with _migrated(db_url) as store:
        head = store.schema_revision()
        store.create_schema()  # at head already: a no-op, not a mismatch
        assert store.schema_revision() == head
