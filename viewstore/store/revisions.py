"""Which schema revisions this code knows, and the error for one it does not.

viewstore numbers its Alembic revisions 0001, 0002, ... in order, so a number past this code's
head was written by a newer viewstore, and any other unknown revision belongs to someone else
(another application's Alembic sharing the version table).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from viewstore.errors import SchemaMismatchError

if TYPE_CHECKING:
    from alembic.config import Config


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
