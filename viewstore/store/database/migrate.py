"""Running the Alembic migrations in a database that other applications may share.

viewstore records its revision in its own table, ``viewstore_alembic_version``, never in
Alembic's default ``alembic_version``: an application managed by its own Alembic keeps its
revision there, and two histories in one table make both tools fail ("Can't locate revision").
On PostgreSQL the store may also live in its own schema (see ``viewstore.store.database.engine``).

Alembic is imported only here and only when the schema is touched: it is a fifth of every CLI
call's start-up otherwise, and appends and reads never need it.

A migration run by the store is silent: Alembic's INFO lines (``Context impl ...``, ``Running
upgrade ...``, one per revision) are dropped while ``upgrade`` runs, and the store's own line
about it is DEBUG. An application that logs at INFO (the OpenHands SDK does) would otherwise
print some forty lines each time it opens a store. Alembic's warnings still pass, and an
application's own Alembic, run outside ``upgrade``, logs as it always did.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, text

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.database import revisions
from viewstore.store.database.engine import WRITE

if TYPE_CHECKING:
    from alembic.config import Config

VERSION_TABLE = "viewstore_alembic_version"

log = logging.getLogger("viewstore.migrations")

# A context variable rather than a logger's level: another thread (or task) running Alembic for
# the application at the same moment keeps its INFO lines.
_quiet = ContextVar("viewstore_quiet_migration", default=False)


class _DropAlembicInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not _quiet.get()


_DROP_INFO = _DropAlembicInfo()


@functools.cache
def _alembic_loggers() -> tuple[logging.Logger, ...]:
    """A logger for each of Alembic's modules, made before the module makes its own (the same
    object, by name), so that what it logs while being imported is filtered too (its plugins
    say "setup plugin ..." then). A logger's filters see only the records logged on it, not
    those its children pass up: each module's logger needs the filter."""
    spec = importlib.util.find_spec("alembic")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    names = {"alembic"}
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            package = ".".join(["alembic", *Path(folder).relative_to(root).parts])
            names.update(f"{package}.{file[:-3]}" for file in files if file.endswith(".py"))
            names.add(package)
    loggers = tuple(logging.getLogger(name.removesuffix(".__init__")) for name in sorted(names))
    for logger in loggers:
        logger.addFilter(_DROP_INFO)
    return loggers


@contextmanager
def quiet_alembic() -> Iterator[None]:
    """Alembic's records below WARNING dropped while this runs, in this thread or task only."""
    _alembic_loggers()
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)


def _migrations_dir() -> str:
    # Shipped as viewstore._migrations (see pyproject); imported by name because the package
    # is mapped from the top-level migrations/ folder, which type checkers do not follow.
    module = importlib.import_module("viewstore._migrations")
    return str(Path(module.__file__ or "").parent)


def alembic_config(connection: Connection | None = None, schema: str | None = None) -> Config:
    """The Alembic configuration of viewstore's migrations; ``connection`` (optional) is the
    one they run on, ``schema`` the PostgreSQL schema of the store (read by migrations/env.py)."""
    from alembic.config import Config  # noqa: PLC0415 - see the module docstring

    config = Config()
    config.set_main_option("script_location", _migrations_dir())
    if connection is not None:
        config.attributes["connection"] = connection
    config.attributes["schema"] = schema
    return config


def upgrade(
    engine: Engine, schema: str | None, revision: str = "head", partitions: int | None = None
) -> None:
    """Create the schema if needed and migrate to ``revision``, in one transaction
    (PostgreSQL's DDL is transactional). ``partitions``: a new store's tables are then
    hash-partitioned (``viewstore.store.distribution.partitions``), in that transaction."""
    with quiet_alembic():
        _upgrade(engine, schema, revision, partitions)


def _upgrade(engine: Engine, schema: str | None, revision: str, partitions: int | None) -> None:
    from alembic import command  # noqa: PLC0415 - see the module docstring

    # Processes that migrate one database at once take turns under the migration lock; the
    # check of the revision it starts from runs under it too, so one migrates and the others
    # then find the schema at head.
    with engine.execution_options(**WRITE).connect() as conn:
        revisions.migration_lock(conn)
        if schema is not None:
            conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {schema}"))
        before = _current(conn, schema)
        revisions.check_known(before, alembic_config())
        command.upgrade(alembic_config(conn, schema), revision)
        if partitions is not None:
            _partition(conn, before, partitions)
        after = _current(conn, schema)
        conn.commit()
    if before != after:
        log.debug("migrated the viewstore schema from %s to %s", before or "empty", after)


def _partition(conn: Connection, before: str | None, partitions: int) -> None:
    from viewstore.store.distribution import partitions as layout  # noqa: PLC0415 - PostgreSQL only

    found = layout.partition_count(conn)
    if found == partitions:
        return  # partitioned so already: init is idempotent
    if before is not None or found:
        raise InvalidArgumentError(
            f"--partitions applies to a new store: this one exists already "
            f"({found or 'no'} partitions)"
        )
    layout.partition(conn, partitions)


def current_revision(engine: Engine, schema: str | None) -> str | None:
    """The revision the store is at (``None``: no viewstore schema yet)."""
    with quiet_alembic(), engine.connect() as conn:
        return _current(conn, schema)


def _current(conn: Connection, schema: str | None) -> str | None:
    from alembic.runtime.migration import MigrationContext  # noqa: PLC0415
    from alembic.util import CommandError  # noqa: PLC0415

    opts = {"version_table": VERSION_TABLE, "version_table_schema": schema}
    try:
        return MigrationContext.configure(conn, opts=opts).get_current_revision()
    except CommandError as error:  # e.g. two heads in the version table
        raise revisions.unreadable(error) from error
