"""The real ``viewstore`` command names the real cause of a failure, in one line on stderr,
with exit code 2 and no traceback: a missing database, an unknown role, an unreachable server,
a database it does not run on, a schema revision it does not know. (A wrong password:
tests/ops/test_login.py, on a server that asks for one.)
"""

from __future__ import annotations

import re
import secrets
import socket
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from viewstore import EventStore

from ..store._helpers import set_schema_revision
from ._helpers import failed_with_one_line, run_viewstore

COMMANDS = [("init",), ("stats",), ("view", "c")]


@pytest.mark.postgres
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_missing_database(pg_server_url: str, command: tuple[str, ...]) -> None:
    name = f"viewstore_missing_{secrets.token_hex(4)}"
    url = make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    line = failed_with_one_line(run_viewstore(url, *command))
    assert f'database "{name}" does not exist' in line
    assert "run `viewstore init`" not in line  # not even from init: the schema is not it


@pytest.mark.postgres
def test_an_unknown_role(pg_server_url: str) -> None:
    role = f"viewstore_no_role_{secrets.token_hex(4)}"
    url = make_url(pg_server_url).set(username=role, password=None)
    line = failed_with_one_line(run_viewstore(url.render_as_string(hide_password=False), "init"))
    assert role in line


def test_an_unreachable_server() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = failed_with_one_line(run_viewstore(f"postgresql://postgres@127.0.0.1:{port}/x", "init"))
    assert line == f"cannot reach the database server at 127.0.0.1:{port}: Connection refused"


@pytest.mark.parametrize(
    "url", ["mysql://root:secret@127.0.0.1/test", "postgresql+asyncpg://u:secret@h/db"]
)
def test_a_database_it_does_not_run_on(url: str) -> None:
    line = failed_with_one_line(run_viewstore(url, "init"))
    assert re.match(r"viewstore does not run on '(mysql|postgresql\+asyncpg)' databases", line)
    assert "secret" not in line  # the URL's password is not echoed


def test_a_sqlite_file_in_a_missing_folder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'no-such-folder' / 'store.db'}"
    line = failed_with_one_line(run_viewstore(url, "init"))
    assert line.startswith("cannot open the SQLite database file")


def _at_revision(url: str, revision: str) -> None:
    with EventStore(url) as store:
        store.create_schema()
    set_schema_revision(url, revision)


def test_a_foreign_revision(db_url: str) -> None:
    _at_revision(db_url, "3fa2c1d9e8b7")
    line = failed_with_one_line(run_viewstore(db_url, "init"))
    assert "'3fa2c1d9e8b7', which is not a viewstore revision" in line


def test_a_schema_newer_than_the_code(db_url: str) -> None:
    _at_revision(db_url, "9999")
    line = failed_with_one_line(run_viewstore(db_url, "init"))
    assert "revision 9999, newer than this viewstore knows" in line
    assert "upgrade viewstore" in line


def test_a_missing_schema_still_says_run_init(empty_db_url: str) -> None:
    line = failed_with_one_line(run_viewstore(empty_db_url, "stats"))
    assert "run `viewstore init`" in line
