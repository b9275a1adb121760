"""A tool for revisions after the baseline that alter tables workers go on appending to: the
instant DDL in a short transaction of its own, whose locks never deadlock the appends going on
meanwhile, then the slow part in batches (docs/operations.md, "Migrations").

Not part of the runtime package: only a revision imports it (``from viewstore._migrations
import online``). Such a revision commits its instant DDL through ``run_alone``, walks its
rows in short transactions keyed on the table's primary key (``in_batches``: idempotent, so a
run killed half way and run again finishes), and takes the migration lock again with ``relock`` before it
ends, as the store's own upgrade holds it to the commit.

On PostgreSQL each ``ALTER`` takes an ``ACCESS EXCLUSIVE`` lock on its table and keeps it to
the end of the transaction. Taken one statement at a time, in the order the statements come,
the locks meet appends that have written the log and wait for ``view_entries``, which the
migration holds while it waits for ``events`` (a revision killed and run again with workers
appending deadlocked so before the release). So ``run_alone``:

- commits what the migration did before, so the DDL's transaction holds nothing else;
- takes the locks of every table the DDL alters first, in one ``LOCK TABLE``, in the order an
  append takes them (``APPEND_ORDER``): an append holding one of them took the ones before it
  already, and finishes without waiting for the migration, which then gets its turn. Appends
  that come later queue behind the lock for the few milliseconds the DDL takes, and then see
  the new schema;
- waits at most ``LOCK_TIMEOUT_MS`` for each lock, below PostgreSQL's ``deadlock_timeout`` (1 s
  by default): a reader takes ``view_entries`` before ``events`` (its join), and another
  client may hold a table for long. The migration then rolls back, pauses and tries again
  (for up to ``WAIT_SECONDS``), so it is the one to give way, before the server cancels an
  append or a read as a deadlock's victim.

SQLite has one writer at a time: the DDL's transaction waits for the write lock (the busy
timeout), and no lock cycle can form.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from viewstore.store.database import revisions

#: The tables an append writes, in the order it locks them (``EventStore._append``: the log,
#: the view rows and indices the projection writes, then the condensations; the fast path
#: writes no condensation).
APPEND_ORDER = ("events", "view_entries", "manipulation_indices", "condensations")
#: PostgreSQL: the longest one attempt waits for a lock (the whole transaction's statements).
LOCK_TIMEOUT_MS = 200
#: How long the attempts go on before the migration fails with the last lock timeout.
WAIT_SECONDS = 600.0
_GIVE_WAY = frozenset({"55P03", "40P01"})  # lock_not_available, deadlock_detected

log = logging.getLogger("viewstore.migrations")


def run_alone(bind: sa.Connection, ddl: Callable[[], object], tables: Sequence[str]) -> int:
    """Commit the migration so far, then run ``ddl`` (statements on ``bind``) in a transaction
    of its own holding ``tables`` (those it alters) locked first, and commit it; returns the
    attempts it took. On PostgreSQL an attempt that waits longer than ``LOCK_TIMEOUT_MS`` for
    a lock is rolled back and made again after a pause."""
    bind.commit()
    if bind.dialect.name != "postgresql":
        ddl()
        bind.commit()
        return 1
    ordered = [name for name in APPEND_ORDER if name in tables]
    ordered += [name for name in tables if name not in ordered]
    deadline = time.monotonic() + WAIT_SECONDS
    pause = 0.05
    attempts = 0
    while True:
        attempts += 1
        try:
            bind.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
            bind.exec_driver_sql(f"LOCK TABLE {', '.join(ordered)} IN ACCESS EXCLUSIVE MODE")
            ddl()
            bind.commit()
            if attempts > 1:
                log.info("the DDL took its locks at attempt %d (%s)", attempts, ", ".join(ordered))
            return attempts
        except sa.exc.DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) not in _GIVE_WAY:
                raise
            bind.rollback()
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


#: Rows per transaction of ``in_batches``; ``VIEWSTORE_MIGRATION_BATCH`` overrides it (a test
#: kills a migration half way with small batches).
BATCH = 1000


def in_batches(
    bind: sa.Connection,
    table: str,
    key: tuple[str, str],
    statement: str,
    *,
    batch: int | None = None,
    after_each: Callable[[int], object] | None = None,
) -> int:
    """Run ``statement`` over ``table`` in the order of its two-column primary key ``key``,
    ``batch`` rows per transaction, each committed before the next; returns the batches run.

    ``statement`` is an ``UPDATE`` or ``DELETE`` of ``table`` whose ``WHERE`` ends with
    ``{range}``, which this fills with the batch's keys (its parameters are named ``_a1``,
    ``_a2``, ``_b1``, ``_b2``). Each batch finds its last key by reading the primary key from
    the previous batch's last one (a keyset: no batch rereads the rows before it) and then
    changes its rows in one short transaction, so appends and reads go on between batches.
    The statement must be idempotent (it leaves a changed row out of its own ``WHERE``): a run
    killed half way and run again passes over the rows already done and finishes.
    ``after_each(n)`` is called once the n-th batch has committed."""
    size = batch or int(os.environ.get("VIEWSTORE_MIGRATION_BATCH", BATCH))
    first, second = key
    after = f"({first} > :_a1 OR ({first} = :_a1 AND {second} > :_a2))"
    upto = f"({first} < :_b1 OR ({first} = :_b1 AND {second} <= :_b2))"
    next_key = sa.text(
        f"SELECT {first}, {second} FROM {table} WHERE {{after}} "
        f"ORDER BY {first}, {second} LIMIT 1 OFFSET :_n"
    )
    bounds: dict[str, Any] = {}
    batches = 0
    while True:
        where_after = after if bounds else "TRUE"
        found = bind.execute(
            sa.text(next_key.text.format(after=where_after)), {**bounds, "_n": size - 1}
        ).first()
        if found is None:  # the last batch: whatever is left
            bind.execute(sa.text(statement.format(range=where_after)), bounds)
            bind.commit()
            batches += 1
            if after_each is not None:
                after_each(batches)
            return batches
        limit = {"_b1": found[0], "_b2": found[1]}
        bind.execute(
            sa.text(statement.format(range=f"{where_after} AND {upto}")), {**bounds, **limit}
        )
        bind.commit()
        batches += 1
        if after_each is not None:
            after_each(batches)
        bounds = {"_a1": found[0], "_a2": found[1]}


def relock(bind: sa.Connection) -> None:
    """Take the migration lock again for the rest of the upgrade (``run_alone`` and the
    batches committed it)."""
    revisions.migration_lock(bind)
