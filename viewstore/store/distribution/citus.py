"""Distributing a store over a Citus cluster (``viewstore citus distribute``).

Every table is distributed by its conversation column and co-located with ``conversations``,
so one conversation's rows of every table share a shard. The server-side append
(``viewstore_append_rows``) is distributed by its conversation argument and
co-located too, so Citus runs each call on the worker that holds the conversation, as one
local transaction. A trigger stamps each event with the transaction id of the node it is
written on, which the per-node change feed needs (``viewstore.store.distribution.shard_feed``). The
statements are argued in docs/distribution.md and run by tests/ops/test_citus.py against a real
cluster; the command refuses a database without the ``citus`` extension.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, text

from viewstore.domain.errors import UnsupportedDatabaseError
from viewstore.store.database.roles import role_names
from viewstore.store.distribution.partitions import TABLES
from viewstore.store.distribution.server_append import FUNCTION, signature

# The position too is drawn where the row is written: the coordinator and each worker draw
# from their own ranges of the sequence (the server-side append runs on the worker, the
# ordinary path's defaults are evaluated on the coordinator), and only one node's draws keep
# a conversation's positions rising with its seqs. Its search_path is pinned like every other
# viewstore function's (docs/schema.md): the sequence is named in the table's own schema, and
# nothing a session puts first in its path (its temporary schema) is ever looked up.
FEED_TXID_FUNCTION = (
    "CREATE OR REPLACE FUNCTION viewstore_feed_txid() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path = pg_catalog, pg_temp AS $$ "
    "BEGIN NEW.txid := pg_current_xact_id()::text::bigint; "
    "NEW.position := nextval(quote_ident(TG_TABLE_SCHEMA) || '.events_position_seq'); "
    "RETURN NEW; END $$"
)
#: Tables with triggers the shards must run (the append-only guards).
GUARDED = ("events", "tombstones", "redactions", "masks")


def statements(database: str) -> list[str]:
    """The statements that distribute the store in ``database``, in order."""
    quoted = database.replace('"', '""')
    out = [
        # The guards are triggers on distributed tables, which Citus runs on the shards only
        # when told to; set for every later session of the database, and for this one.
        f'ALTER DATABASE "{quoted}" SET citus.enable_unsafe_triggers = on',
        "SET citus.enable_unsafe_triggers = on",
        # The per-node feed (viewstore.store.distribution.shard_feed): each shard stamps a row
        # with its own node's transaction id, the one that node's snapshot horizon is measured
        # against, and with a position from its own node's range of the sequence.
        FEED_TXID_FUNCTION,
        "CREATE TRIGGER events_feed_txid BEFORE INSERT ON events "
        "FOR EACH ROW EXECUTE FUNCTION viewstore_feed_txid()",
        # The feed's wake-up (docs/schema.md) is a statement-level trigger: Citus would run it
        # on each shard, on the workers, where no follower listens. Followers of a
        # distributed store poll (viewstore/store/feed/follow.py).
        "DROP TRIGGER IF EXISTS events_feed_notify ON events",
    ]
    for table, column in TABLES.items():
        colocate = "none" if table == "conversations" else "conversations"
        out.append(
            f"SELECT create_distributed_table('{table}', '{column}', colocate_with => '{colocate}')"
        )
    out.append(
        f"SELECT create_distributed_function('{FUNCTION}({signature()})', 'p_key', "
        "colocate_with => 'conversations')"
    )
    # Citus checks a shard's privileges as the session user: the reader needs its grants on
    # the distributed tables themselves (propagated to their shards), not only on the views.
    reader = role_names(database)["reader"]
    out.append(f'GRANT SELECT ON {", ".join(TABLES)} TO "{reader}"')
    return out


def distribute(conn: Connection, database: str) -> list[str]:
    """Run ``statements`` in the caller's transaction; refuse a database without Citus."""
    found = conn.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'citus'")).first()
    if found is None:
        raise UnsupportedDatabaseError(
            f"database {database!r} has no citus extension: run this on a Citus coordinator "
            "(CREATE EXTENSION citus), or use --print to see the statements"
        )
    done = statements(database)
    for statement in done:
        conn.execute(text(statement))
    return done


_SHARD_OF = "SELECT get_shard_id_for_distribution_column('conversations', CAST(:c AS text))"
_ON_SHARD = (
    "SELECT c FROM unnest(CAST(:candidates AS text[])) AS c "
    "WHERE get_shard_id_for_distribution_column('conversations', c) = :shard LIMIT 1"
)
#: Ids tried per round: with Citus's default 32 shards one in 32 lands on a given shard, so a
#: round of 256 finds one but for a chance of about 3 in 10^4; the next round goes on.
CANDIDATES = 256


def colocated_id(conn: Connection, source: str) -> str:
    """A new conversation id (32 hex digits, as a UUID's) that the cluster places on the
    shard of ``source``: a fork under it then shares its source's shard, so reading its shared
    prefix stays on one node, and a shard move takes the family together."""
    shard = conn.execute(text(_SHARD_OF), {"c": source}).scalar_one()
    while True:
        candidates = [uuid.uuid4().hex for _ in range(CANDIDATES)]
        found = conn.execute(text(_ON_SHARD), {"candidates": candidates, "shard": shard})
        chosen = found.scalar()
        if chosen is not None:
            return str(chosen)
