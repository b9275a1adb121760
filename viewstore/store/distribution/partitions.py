"""Hash-partitioned tables on PostgreSQL (``viewstore init --partitions N``).

A new store is migrated as usual, then, in the same transaction, each of its tables is rebuilt
as a table partitioned by ``HASH`` of its conversation column into ``N`` partitions: same name,
columns, defaults, keys, indexes (by their own names), foreign keys, triggers and grants, and
the analyst views recreated over it. Every key of every table starts with the conversation
column, so each key stays unique per partition, and one conversation's rows of every table
land in the partition of the same number. Later migrations alter the partitioned tables like
any others.

Row-level triggers on a partitioned table apply to its partitions. A statement-level
``TRUNCATE`` trigger does not: a ``TRUNCATE`` of one partition would bypass the log's guard.
So each partition of an append-only table gets that trigger of its own.

Only an empty store is partitioned. Moving rows between layouts is a dump and restore.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from viewstore.domain.errors import InvalidArgumentError, UnsupportedDatabaseError

#: Each table and the column it is partitioned by, parents before children.
TABLES = {
    "conversations": "id",
    "events": "conversation_id",
    "condensations": "conversation_id",
    "view_entries": "conversation_id",
    "manipulation_indices": "conversation_id",
    "base_states": "conversation_id",
    "conversation_sources": "conversation_id",
    "server_conversations": "conversation_id",
    "tombstones": "conversation_id",
    "redactions": "conversation_id",
    "masks": "conversation_id",
    "catalogue_sizes": "conversation_id",
}
#: The append-only tables and the function their guards call.
APPEND_ONLY = {
    "events": "viewstore_events_append_only",
    "tombstones": "viewstore_tombstones_append_only",
    "redactions": "viewstore_redactions_append_only",
    "masks": "viewstore_masks_append_only",
}
MAX_PARTITIONS = 1024


def check_count(partitions: object) -> int:
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 1 <= partitions <= MAX_PARTITIONS
    ):
        raise InvalidArgumentError(
            f"partitions must be an integer from 1 to {MAX_PARTITIONS}, got {partitions!r}"
        )
    return partitions


def partition_count(conn: Connection) -> int:
    """How many partitions the store's log has (0: not partitioned)."""
    if conn.dialect.name != "postgresql":
        return 0
    found = conn.execute(
        text(
            "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhparent "
            "WHERE c.oid = to_regclass('events')"
        )
    ).scalar()
    return int(found or 0)


def partition(conn: Connection, partitions: int) -> None:
    """Rebuild the (empty) store's tables as hash-partitioned ones, in the caller's
    transaction."""
    if conn.dialect.name != "postgresql":
        raise UnsupportedDatabaseError(
            "partitioned tables need PostgreSQL; an SQLite store has one file and no partitions"
        )
    check_count(partitions)
    tables = list(TABLES)
    _check_empty(conn, tables)
    saved = _definitions(conn, tables)
    # Views in the order they were made (condensation_log reads condensation_forgotten, a view
    # too): dropped last first, made again first first.
    for name, _ in reversed(saved["views"]):
        conn.execute(text(f"DROP VIEW {name}"))
    for table, name, _ in saved["foreign_keys"]:
        conn.execute(text(f"ALTER TABLE {table} DROP CONSTRAINT {name}"))
    for table in tables:
        _rebuild(conn, table, TABLES[table], partitions)
    _restore(conn, saved, partitions)


def _check_empty(conn: Connection, tables: list[str]) -> None:
    for table in tables:
        if conn.execute(text(f"SELECT EXISTS (SELECT 1 FROM {table})")).scalar():
            raise InvalidArgumentError(
                f"only an empty store can be partitioned: {table} has rows "
                "(dump and restore into a new partitioned store instead)"
            )


def _rebuild(conn: Connection, table: str, column: str, partitions: int) -> None:
    conn.execute(text(f"ALTER TABLE {table} RENAME TO {table}_unpartitioned"))
    conn.execute(
        text(
            f"CREATE TABLE {table} (LIKE {table}_unpartitioned INCLUDING DEFAULTS "
            f"INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS) "
            f"PARTITION BY HASH ({column})"
        )
    )
    for i in range(partitions):
        conn.execute(
            text(
                f"CREATE TABLE {table}_p{i} PARTITION OF {table} "
                f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})"
            )
        )
    conn.execute(text(f"DROP TABLE {table}_unpartitioned"))


def _restore(conn: Connection, saved: dict[str, list[Any]], partitions: int) -> None:
    """Keys, indexes, foreign keys, triggers, views and grants, as they were."""
    for statement in saved["keys"] + saved["indexes"]:
        conn.execute(text(statement))
    for table, name, definition in saved["foreign_keys"]:
        conn.execute(text(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}"))
    for statement in saved["triggers"]:
        conn.execute(text(statement))
    for table, function in APPEND_ONLY.items():
        for i in range(partitions):
            conn.execute(
                text(
                    f"CREATE TRIGGER {table}_p{i}_no_truncate BEFORE TRUNCATE ON {table}_p{i} "
                    f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
                )
            )
    for name, definition in saved["views"]:
        conn.execute(text(f"CREATE VIEW {name} AS {definition}"))
    for statement in saved["grants"]:
        conn.execute(text(statement))


def _definitions(conn: Connection, names: list[str]) -> dict[str, list[Any]]:
    """What rebuilding the tables would lose, as the statements that make it again."""
    tables = {"t": names}
    keys = [
        f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}"
        for table, name, definition in conn.execute(
            text(
                "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) "
                "FROM pg_constraint c WHERE c.contype IN ('p', 'u') "
                "AND c.conrelid::regclass::text = ANY(:t) ORDER BY 1, 2"
            ),
            tables,
        )
    ]
    indexes = [
        definition
        for (definition,) in conn.execute(
            text(
                "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i "
                "WHERE i.indrelid::regclass::text = ANY(:t) AND NOT EXISTS "
                "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) ORDER BY 1"
            ),
            tables,
        )
    ]
    foreign_keys = [
        tuple(row)
        for row in conn.execute(
            text(
                "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) "
                "FROM pg_constraint c WHERE c.contype = 'f' AND c.conparentid = 0 "
                "AND c.conrelid::regclass::text = ANY(:t) ORDER BY 1, 2"
            ),
            tables,
        )
    ]
    triggers = [
        definition
        for (definition,) in conn.execute(
            text(
                "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t "
                "WHERE NOT t.tgisinternal AND t.tgrelid::regclass::text = ANY(:t) ORDER BY 1"
            ),
            tables,
        )
    ]
    views = [
        tuple(row)
        for row in conn.execute(
            text(
                "SELECT v.oid::regclass::text, pg_get_viewdef(v.oid) FROM pg_class v "
                "WHERE v.relkind = 'v' AND v.oid IN (SELECT r.ev_class FROM pg_depend d "
                "JOIN pg_rewrite r ON r.oid = d.objid WHERE d.refobjid::regclass::text = ANY(:t)) "
                "ORDER BY v.oid"
            ),
            tables,
        )
    ]
    view_names = [name for name, _ in views]
    grants = [
        f'GRANT {privilege} ON {table} TO "{grantee}"'
        for table, grantee, privilege in conn.execute(
            text(
                "SELECT table_name, grantee, privilege_type "
                "FROM information_schema.role_table_grants "
                "WHERE table_schema = current_schema() AND table_name = ANY(:t) "
                "AND grantee <> current_user ORDER BY 1, 2, 3"
            ),
            {"t": names + view_names},
        )
    ]
    return {
        "keys": keys,
        "indexes": indexes,
        "foreign_keys": foreign_keys,
        "triggers": triggers,
        "views": views,
        "grants": grants,
    }
