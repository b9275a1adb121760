"""Which schema revisions this code knows, and the error for one it does not.

viewstore numbers its Alembic revisions 0001, 0002, ... in order, so a number past this code's
head was written by a newer viewstore, and any other unknown revision belongs to someone else
(another application's Alembic sharing the version table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from viewstore.domain.errors import SchemaMismatchError

if TYPE_CHECKING:
    from alembic.config import Config

#: The advisory lock key migrations take on PostgreSQL: "viewstor" in ASCII, a constant all
#: versions of viewstore share (advisory keys are per database, so databases never contend).
MIGRATION_LOCK_KEY = 0x76696577_73746F72


def migration_lock(conn: Connection) -> None:
    """Open ``conn``'s transaction holding the database's migration lock until it ends.

    Without it, two processes migrating a fresh database at once both create the same tables
    (PostgreSQL: a duplicate key in its catalogue; SQLite: a read transaction that cannot
    become a write one fails at once, without waiting). PostgreSQL: a transaction-scoped
    advisory lock, released by the commit or rollback whatever happens. SQLite: ``conn`` was
    opened for writing, so its first statement begins with BEGIN IMMEDIATE, which takes the
    write lock up front and waits for it as long as the busy timeout allows.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    else:
        conn.execute(text("SELECT 1"))


def check_known(revision: str | None, config: Config) -> None:
    """Raise ``SchemaMismatchError`` when ``revision`` (the database's) is not one of ours."""
    from alembic.script import ScriptDirectory  # noqa: PLC0415 - see alembic_config

    if revision is None:
        return
    script = ScriptDirectory.from_config(config)
    if any(known.revision == revision for known in script.walk_revisions()):
        return
    head = script.get_current_head()
    if revision.isdigit() and head is not None and head.isdigit() and int(revision) > int(head):
        raise SchemaMismatchError(
            f"the database schema is at revision {revision}, newer than this viewstore "
            f"knows (up to {head}): upgrade viewstore"
        )
    raise SchemaMismatchError(
        f"the database's Alembic version table holds revision {revision!r}, which is not a "
        "viewstore revision (another application's migrations?): nothing was migrated"
    )


def unreadable(error: Exception) -> SchemaMismatchError:
    """The version table could not be read as viewstore's (several heads, for one)."""
    detail = " ".join(str(error).split())
    return SchemaMismatchError(f"the database's Alembic version table is not viewstore's: {detail}")
