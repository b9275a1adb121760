"""A trigram index for the catalogue's search, where the server has ``pg_trgm``.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26

``conversations(search=...)`` and its count keep the conversations whose id contains a text
(``id LIKE '%' || text || '%'``), which no B-tree serves: every id was read. PostgreSQL's
``pg_trgm`` extension gives a GIN index of the ids' trigrams that serves ``LIKE`` (and
``ILIKE``) of any pattern with three or more characters between its wildcards:
``ix_conversations_id_trgm`` on ``conversations USING gin (id gin_trgm_ops)``.

The index is optional. The extension is used where it is installed (in any schema: its
operator class is named with that schema), created (``CREATE EXTENSION IF NOT EXISTS
pg_trgm``, in the store's schema) where it is available and the migrating role may create it
(a trusted extension: ``CREATE`` on the database), and otherwise the migration does nothing
but log that search reads every id (docs/operations.md). SQLite has no such index; its search
reads the ids, from the primary key.

Built like revision 0017's (``viewstore.store.database.online_index``): on a store holding
conversations ``CREATE INDEX CONCURRENTLY`` outside the migration's transaction (partitioned:
``ON ONLY`` the parent, each partition's concurrently, attached), on an empty store in the
transaction. The drift check leaves the
index out (``viewstore.store.database.schema.OPTIONAL_INDEXES``): a store has it or not.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from viewstore.store.database import online_index

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

NAME = "ix_conversations_id_trgm"
log = logging.getLogger("viewstore.migrations")


def _trigram_schema(bind: sa.Connection) -> str | None:
    """The schema holding pg_trgm, created first if it can be; None without it."""
    query = sa.text(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_trgm'"
    )
    found = bind.execute(query).scalar()
    if found is not None:
        return str(found)
    available = bind.execute(
        sa.text("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm')")
    ).scalar()
    if not available:
        log.warning("pg_trgm is not available on this server: catalogue search reads every id")
        return None
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except sa.exc.DBAPIError as error:
        log.warning(
            "pg_trgm could not be created (%s): catalogue search reads every id; "
            "CREATE EXTENSION pg_trgm as a privileged role and migrate again to add its index",
            str(error.orig).strip().splitlines()[0],
        )
        return None
    return str(bind.execute(query).scalar())


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    schema = _trigram_schema(bind)
    if schema is None:
        return
    online_index.create(bind, "conversations", [(NAME, f'USING gin (id "{schema}".gin_trgm_ops)')])


def downgrade() -> None:
    # The extension stays: other objects (another application's) may use it.
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {NAME}")
