"""The change feed wakes its followers: a notification on every commit that appends events.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-25

PostgreSQL only. A statement-level ``AFTER INSERT`` trigger on ``events``
(``events_feed_notify``) calls ``viewstore_feed_notify()``, which runs ``pg_notify`` on the
store's channel: ``viewstore_feed_`` and the name of the schema the log lives in (its MD5
when that would pass PostgreSQL's 63 bytes), so two stores of one database do not wake each
other's followers. PostgreSQL delivers a notification at commit, never for a rolled-back
transaction, and folds a transaction's identical notifications into one. The payload is the
transaction's id, the ``txid`` its rows carry: a follower woken by it knows which rows to wait
for (the feed shows them once every older transaction has ended), and reads the feed itself
for the facts. The trigger fires once per ``INSERT``
statement, inside the append's own statement or server-side call, so an append sends the
server nothing more. ``EventStore.follow`` listens on the channel (``viewstore/store/feed/follow.py``).

The function's ``search_path`` is pinned like every viewstore function's (revision 0015). On a
hash-partitioned store the trigger sits on the partitioned table, where a statement-level
trigger fires for an ``INSERT`` into it. A log already distributed by Citus is left without the
trigger: Citus would run a statement-level trigger on each shard, on the worker, where no
follower listens (``viewstore citus distribute`` drops it for the same reason; followers of a
distributed store poll). SQLite has no notifications: its followers poll, and this revision
changes nothing there.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# Frozen here, as migrations freeze their SQL; viewstore/store/feed/follow.py names the same channel.
_NOTIFY = """
CREATE OR REPLACE FUNCTION {s}.viewstore_feed_notify() RETURNS trigger
LANGUAGE plpgsql SET search_path = {s}, pg_temp AS $$
BEGIN
    PERFORM pg_notify('viewstore_feed_' || CASE WHEN octet_length(TG_TABLE_SCHEMA) <= 48
                      THEN TG_TABLE_SCHEMA ELSE md5(TG_TABLE_SCHEMA) END,
                      pg_current_xact_id()::text);
    RETURN NULL;
END $$
"""
_TRIGGER = (
    "CREATE TRIGGER events_feed_notify AFTER INSERT ON {s}.events "
    "FOR EACH STATEMENT EXECUTE FUNCTION {s}.viewstore_feed_notify()"
)
_DISTRIBUTED = (
    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') "
    "AND EXISTS (SELECT 1 FROM pg_class WHERE relname = 'pg_dist_partition' "
    "AND relnamespace = 'pg_catalog'::regnamespace)"
)


def _schema() -> str:
    found = op.get_bind().execute(text("SELECT quote_ident(current_schema())")).scalar_one()
    return str(found)


def _distributed() -> bool:
    bind = op.get_bind()
    if not bind.execute(text(_DISTRIBUTED)).scalar():
        return False
    found = bind.execute(
        text("SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('events')")
    ).first()
    return found is not None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = _schema()
    op.execute(_NOTIFY.format(s=schema))
    if not _distributed():
        op.execute(_TRIGGER.format(s=schema))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = _schema()
    op.execute(f"DROP TRIGGER IF EXISTS events_feed_notify ON {schema}.events")
    op.execute(f"DROP FUNCTION IF EXISTS {schema}.viewstore_feed_notify()")
