"""Backend fixtures for the contract suite: the same tests run on SQLite and PostgreSQL.

Fixtures yield database URL strings only; tests build their own store/engine from them.

PostgreSQL server resolution (see docs/operations.md, "Tests against PostgreSQL"):
1. ``VIEWSTORE_TEST_POSTGRES_URL`` if set (connection errors are errors);
2. otherwise a throwaway server of the test process's own, started from the PostgreSQL binaries
   it finds (tests/_throwaway_pg.py): no running server, role or database needed, and each
   xdist worker has its own, so that one worker's open transactions never hold back what
   another's feed tests wait for;
3. otherwise testcontainers' PostgreSQL where a Docker engine answers;
4. otherwise PostgreSQL tests skip with the reason.

With ``VIEWSTORE_REQUIRE_POSTGRES=1`` any skipped PostgreSQL test fails the session.

Isolation: every test that asks for ``fresh_pg_url`` gets a brand-new empty database, dropped
WITH (FORCE) afterwards. ``db_url`` gives a store already at head, of each layout: a copy of a
template the test process migrated once (tests/_pg_clone.py; a SQLite file copied with
SQLite's backup API), because migrating a new database costs more than most tests do.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from tests import _required as required_skips
from tests._pg_clone import adopt_roles
from tests._throwaway_pg import ThrowawayPostgres, ThrowawayUnavailable
from viewstore import EventStore
from viewstore.store.database.roles import role_names

POSTGRES_URL_ENV = "VIEWSTORE_TEST_POSTGRES_URL"
REQUIRE_POSTGRES_ENV = "VIEWSTORE_REQUIRE_POSTGRES"
DB_PREFIX = "viewstore_test_"

_PG_SKIPS: list[str] = []  # PostgreSQL-related skips seen this session
_SKIPS: dict[str, int] = {}  # every skip's reason, counted, for the one-line-per-kind summary
#: The throwaway servers this process started (a worker's are reported to the controller).
_THROWAWAY: list[str] = []
_THROWAWAY_KEY = "viewstore_throwaway_servers"


# --------------------------------------------------------------------------- PostgreSQL server


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """URL of a PostgreSQL server (any database on it we may connect to for admin work)."""
    env_url = os.environ.get(POSTGRES_URL_ENV)
    if env_url:
        yield env_url
        return
    try:
        server = ThrowawayPostgres.start()
    except ThrowawayUnavailable as exc:
        throwaway_failed = str(exc)[:300]
    else:
        _THROWAWAY.append(f"{server.folder} ({server.bin_dir})")
        try:
            yield server.url
        finally:
            server.stop()
        return

    container: Any = None
    try:
        import docker  # type: ignore[import-untyped]  # noqa: PLC0415

        try:  # testcontainers >= 4.14 moved it; older 4.x only has the old path
            from testcontainers.community.postgres import (  # noqa: PLC0415
                PostgresContainer,
            )
        except ImportError:
            from testcontainers.postgres import PostgresContainer  # noqa: PLC0415

        docker.from_env(timeout=5).ping()
        container = PostgresContainer("postgres:16-alpine", driver="psycopg")
        container.start()
        url = container.get_connection_url()
    except Exception as exc:  # no Docker engine, no image, anything: skip with the reason
        if container is not None:
            with contextlib.suppress(Exception):
                container.stop()
        pytest.skip(
            f"PostgreSQL unavailable: {POSTGRES_URL_ENV} is not set, no throwaway server "
            f"({throwaway_failed}) and testcontainers could not start one "
            f"({type(exc).__name__}: {str(exc)[:120]})"
        )
    try:
        yield url
    finally:
        container.stop()


@pytest.fixture(scope="session")
def pg_admin_engine(pg_server_url: str) -> Iterator[Engine]:
    """AUTOCOMMIT engine on the server URL, for CREATE/DROP DATABASE."""
    engine = create_engine(pg_server_url, isolation_level="AUTOCOMMIT")
    try:
        yield engine
    finally:
        engine.dispose()


def _create_database(admin: Engine, server_url: str) -> tuple[str, str]:
    name = DB_PREFIX + secrets.token_hex(6)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    return name, url


def _drop_database(admin: Engine, name: str) -> None:
    """Drop a test database and the roles its migrations created for it (roles belong to the
    whole server and would outlive it: see viewstore/store/database/roles.py)."""
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        for role in role_names(name).values():
            conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))


@contextlib.contextmanager
def _scratch_database(admin: Engine, server_url: str) -> Iterator[str]:
    name, url = _create_database(admin, server_url)
    try:
        yield url
    finally:
        _drop_database(admin, name)


@pytest.fixture
def fresh_pg_url(pg_admin_engine: Engine, pg_server_url: str) -> Iterator[str]:
    """A brand-new empty PostgreSQL database for one test, dropped afterwards."""
    with _scratch_database(pg_admin_engine, pg_server_url) as url:
        yield url


class PgTemplates:
    """Stores at head on the test server: each layout migrated once into a template database,
    then copied for each test (tests/_pg_clone.py)."""

    def __init__(self, admin: Engine, server_url: str) -> None:
        self.admin, self.server_url = admin, server_url
        self.templates: dict[int | None, str] = {}

    def clone(self, partitions: int | None) -> tuple[str, str]:
        """A new database holding a copy of the store at head: its name and URL."""
        from viewstore import EventStore  # noqa: PLC0415

        template = self.templates.get(partitions)
        if template is None:
            template, url = _create_database(self.admin, self.server_url)
            with EventStore(url) as store:  # closing it disposes its pool: no one stays on
                store.create_schema(partitions=partitions)
            self.templates[partitions] = template
        name = DB_PREFIX + secrets.token_hex(6)
        with self.admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
        url = make_url(self.server_url).set(database=name).render_as_string(hide_password=False)
        engine = create_engine(url)
        try:
            with engine.begin() as conn:
                adopt_roles(conn, template, name)
        finally:
            engine.dispose()
        return name, url

    def drop(self) -> None:
        for name in self.templates.values():
            _drop_database(self.admin, name)


@pytest.fixture(scope="session")
def pg_templates(pg_admin_engine: Engine, pg_server_url: str) -> Iterator[PgTemplates]:
    templates = PgTemplates(pg_admin_engine, pg_server_url)
    try:
        yield templates
    finally:
        templates.drop()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store at head, migrated once per test process, for ``db_url`` to copy."""
    from viewstore import EventStore  # noqa: PLC0415

    template = tmp_path_factory.mktemp("template") / "store.db"
    with EventStore(f"sqlite:///{template}") as store:
        store.create_schema()
    return template


@pytest.fixture
def second_pg_url(pg_admin_engine: Engine, pg_server_url: str) -> Iterator[str]:
    """Another brand-new PostgreSQL database, for a test that compares two."""
    with _scratch_database(pg_admin_engine, pg_server_url) as url:
        yield url


# --------------------------------------------------------------------------- SQLite / both


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file database for one test."""
    return f"sqlite:///{tmp_path / 'store.db'}"


#: Partitions of the third layout (``viewstore init --partitions``).
PARTITIONS = 4
#: A test module that sets this to True also runs its ``db_url`` tests on a store whose tables
#: are hash-partitioned, as every test of the contract suite (tests/contract/) does; the others
#: deselect that layout (docs/distribution.md).
PARTITIONED_TOO = "PARTITIONED_TOO"
CONTRACT = Path(__file__).parent / "contract"


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("postgres_partitioned", marks=pytest.mark.postgres),
    ],
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a new store at head of each layout, of its own: ``EventStore(db_url)``. Its
    ``create_schema()`` finds it at head. A test of creating or migrating a store starts from
    ``sqlite_url`` or ``fresh_pg_url`` (empty) instead."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        target = tmp_path / "store.db"
        # The backup API copies a consistent database whatever its journal mode.
        with (
            contextlib.closing(sqlite3.connect(template)) as source,
            contextlib.closing(sqlite3.connect(target)) as copy,
        ):
            source.backup(copy)
        yield f"sqlite:///{target}"
        return
    templates: PgTemplates = request.getfixturevalue("pg_templates")
    name, url = templates.clone(PARTITIONS if request.param == "postgres_partitioned" else None)
    try:
        yield url
    finally:
        _drop_database(templates.admin, name)


@pytest.fixture
def store(db_url: str) -> Iterator[EventStore]:
    """An EventStore on a fresh database of each backend, migrated to head (the contract suite
    has its own, of each API flavour too: tests/contract/conftest.py)."""
    with EventStore(db_url) as opened:
        opened.create_schema()
        yield opened


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_db_url(request: pytest.FixtureRequest) -> str:
    """URL of an empty database of each backend, for a test of creating a store."""
    name = "sqlite_url" if request.param == "sqlite" else "fresh_pg_url"
    return str(request.getfixturevalue(name))


#: A Citus coordinator's URL for tests/ops/test_citus.py. Without it those tests are deselected,
#: not skipped: no Citus package exists for this machine, so CI has no cluster to run them on
#: (docs/distribution.md says how they were run).
CITUS_URL_ENV = "VIEWSTORE_TEST_CITUS_URL"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    no_citus = not os.environ.get(CITUS_URL_ENV)
    for item in items:
        callspec = getattr(item, "callspec", None)
        layout = callspec.params.get("db_url") if callspec is not None else None
        module = getattr(item, "module", None)
        every_layout = getattr(module, PARTITIONED_TOO, False) or CONTRACT in item.path.parents
        unpartitioned = not every_layout
        citus = item.get_closest_marker("citus") is not None
        if (layout == "postgres_partitioned" and unpartitioned) or (no_citus and citus):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """The reference vectors copied from the real openhands-sdk (see its README.md)."""
    path = Path(__file__).parent / "data" / "vectors"
    assert path.is_dir(), f"missing reference vectors at {path}"
    return path


# --------------------------------------------------------------------------- REQUIRE_POSTGRES


def _require_postgres() -> bool:
    return os.environ.get(REQUIRE_POSTGRES_ENV, "").strip() not in ("", "0", "false", "no")


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _note_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    kind = reason.removeprefix("Skipped: ")
    _SKIPS[kind] = _SKIPS.get(kind, 0) + 1
    if "postgres" in getattr(report, "keywords", {}) or "postgresql" in reason.lower():
        _PG_SKIPS.append(f"{report.nodeid}: {reason}")


def pytest_configure(config: pytest.Config) -> None:
    _PG_SKIPS.clear()
    _SKIPS.clear()
    required_skips.register(config)
    _THROWAWAY.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note_skip(report)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: note the throwaway servers a worker ran (for the summary)."""
    reported = getattr(node, "workeroutput", {}).get(_THROWAWAY_KEY, "")
    _THROWAWAY.extend(line for line in reported.split("\n") if line)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_THROWAWAY_KEY] = "\n".join(_THROWAWAY)
    skips = _PG_SKIPS
    if _require_postgres() and skips and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    # One line per kind of skip, not one per test (pytest's own -rs would repeat a fixture's
    # reason for every test that uses it).
    if _SKIPS:
        terminalreporter.section("skipped, by reason", sep="-")
        for reason, count in sorted(_SKIPS.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{count:5d} skipped: {reason}")
    if _THROWAWAY:
        terminalreporter.write_line(
            f"PostgreSQL tests ran on throwaway servers, one per test process, now removed: "
            f"{'; '.join(sorted(_THROWAWAY))}. Set {POSTGRES_URL_ENV} to use another server"
        )
    skips = _PG_SKIPS
    if _require_postgres() and skips:
        terminalreporter.section("PostgreSQL required", sep="=", red=True, bold=True)
        for line in skips[:20]:
            terminalreporter.write_line(f"SKIPPED {line}", red=True)
        terminalreporter.write_line(
            f"FAILED: {len(skips)} PostgreSQL test(s) skipped while {REQUIRE_POSTGRES_ENV}=1 "
            f"(set {POSTGRES_URL_ENV} to a reachable server)",
            red=True,
            bold=True,
        )
