"""Indexes a migration adds without stopping a PostgreSQL store in use.

``CREATE INDEX CONCURRENTLY`` lets appends and reads go on while it builds, but it cannot run
in a transaction and it waits for every transaction holding an older snapshot. So on a store
that holds rows, the migrations before are committed first (the transaction-scoped migration
lock goes with them: this migrator holds nothing another waits for), each index is built in
autocommit mode, and the migration lock is taken again for the rest of the upgrade. A build a
crash interrupted leaves an invalid index: it is dropped and built again. A partitioned table
takes no concurrent build: its index is made ``ON ONLY`` the parent (invalid until complete),
each partition's concurrently, and each attached. Citus propagates a concurrent build to the
shards.

An empty table (a new store, migrated in one transaction) and SQLite get a plain
``CREATE INDEX`` in the migration's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa

from viewstore.store.database.revisions import MIGRATION_LOCK_KEY

#: (index name, what follows ``ON <table>``: its columns, ``USING ...``, a ``WHERE``).
IndexSpec = tuple[str, str]


def create(bind: sa.Connection, table: str, indexes: Sequence[IndexSpec]) -> None:
    """Create ``indexes`` on ``table`` in a migration: online where the table holds rows."""
    if not _populated(bind, table):
        for name, definition in indexes:
            bind.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {name} ON {table} {definition}"))
        return
    with _autocommit(bind) as autocommit:
        partitions = [
            str(name)
            for name in autocommit.execute(
                sa.text(
                    "SELECT inhrelid::regclass::text FROM pg_inherits "
                    "WHERE inhparent = to_regclass(:t) ORDER BY 1"
                ),
                {"t": table},
            ).scalars()
        ]
        for name, definition in indexes:
            _build(autocommit, table, name, definition, partitions)


def drop(bind: sa.Connection, table: str, names: Sequence[str]) -> None:
    """Drop the indexes ``names`` of ``table`` in a migration: on a PostgreSQL store holding
    rows, each by ``DROP INDEX CONCURRENTLY``, which waits for the transactions using the index
    instead of queueing every append behind its lock. A partitioned table's index takes no
    concurrent drop: dropped in the migration's transaction (a change of the catalogue)."""
    populated = _populated(bind, table)
    partitioned = populated and bool(
        bind.execute(
            sa.text("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass(:t)"),
            {"t": table},
        ).scalar()
    )
    if not populated or partitioned:
        for name in names:
            bind.execute(sa.text(f"DROP INDEX IF EXISTS {name}"))
        return
    with _autocommit(bind) as autocommit:
        for name in names:
            autocommit.execute(sa.text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))


def _populated(bind: sa.Connection, table: str) -> bool:
    return bind.dialect.name == "postgresql" and bool(
        bind.execute(sa.text(f"SELECT EXISTS (SELECT 1 FROM {table})")).scalar()
    )


@contextmanager
def _autocommit(bind: sa.Connection) -> Iterator[sa.Connection]:
    """The migration's connection out of its transaction (what the migration did so far
    committed, and the migration lock with it), in autocommit mode; the lock is taken again
    after."""
    bind.commit()
    autocommit = bind.execution_options(isolation_level="AUTOCOMMIT")
    try:
        yield autocommit
    finally:
        bind.commit()  # ends SQLAlchemy's autobegun (autocommit) transaction: nothing to commit
        bind.execution_options(isolation_level=bind.default_isolation_level)
    bind.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})


def child_name(partition: str, definition: str) -> str:
    """The name PostgreSQL gives a partition's part of an index created on the parent (its
    columns joined), so an index built here is named as one ``create_schema()`` made."""
    columns = definition[definition.index("(") + 1 : definition.index(")")]
    names = "_".join(column.split()[0] for column in columns.split(","))
    return f"{partition.rsplit('.', maxsplit=1)[-1]}_{names}_idx"


def _build(
    conn: sa.Connection, table: str, name: str, definition: str, partitions: list[str]
) -> None:
    _drop_invalid(conn, name)
    if not partitions:
        conn.execute(
            sa.text(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} {definition}")
        )
        return
    conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {name} ON ONLY {table} {definition}"))
    for partition in partitions:
        child = child_name(partition, definition)
        _drop_invalid(conn, child)
        conn.execute(
            sa.text(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {child} ON {partition} {definition}")
        )
        attached = conn.execute(
            sa.text(
                "SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhparent = to_regclass(:p) "
                "AND inhrelid = to_regclass(:c))"
            ),
            {"p": name, "c": child},
        ).scalar()
        if not attached:
            conn.execute(sa.text(f"ALTER INDEX {name} ATTACH PARTITION {child}"))


def _drop_invalid(conn: sa.Connection, name: str) -> None:
    """An index a failed concurrent build left behind (invalid, never used): built again."""
    invalid = conn.execute(
        sa.text(
            "SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
            "WHERE i.indexrelid = to_regclass(:n) AND NOT i.indisvalid AND c.relkind = 'r')"
        ),
        {"n": name},
    ).scalar()
    if invalid:
        conn.execute(sa.text(f"DROP INDEX CONCURRENTLY {name}"))
