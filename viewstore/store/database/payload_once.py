"""Revision 0022's online part: a store's view rows lose their copies of the log's payloads.

Before revision 0022 every row of ``view_entries`` carried a copy of its event (payload,
``source``, ``timestamp``, ``parent_id``); since, a read joins the log on its primary key and
only a summary's row keeps its own (the log has no row of it). A fork's rows copied from its
source name the conversation whose log holds their event (``holder``).

The revision's DDL is instant (a nullable column added, a ``NOT NULL`` dropped). What takes
time is done here, after that DDL is committed, in short transactions, so appends and reads
go on meanwhile (a read of a row that still carries its copy reads the copy, which equals the
log's):

1. ``set_holders``: each fork's copied rows get their ``holder``, one fork per transaction.
2. ``drop_copies``: the copies are set to NULL, ``batch`` rows per transaction, walking the
   table in its key order (keyset, so a batch never rereads the ones before).

Workers fork meanwhile too, and a fork copies its source's rows as they are then (issue 37):
``set_holders`` goes on until it has listed every fork, and each walk ends with the forks
made while it ran, one per transaction.

Both are idempotent: a migration killed half way is run again from the start, finds the work
done so far done, and finishes. Space: PostgreSQL reuses what the NULLed copies held only once
``VACUUM`` has run (autovacuum will); ``VACUUM FULL`` gives it back to the system
(docs/operations.md). SQLite reuses freed pages for new rows; ``VACUUM`` shrinks the file.

Revision 0023 goes on the same way for the rows' envelopes (``drop_envelopes``): a read builds
each Event from its payload, where every field the envelope repeated is, and no longer reads
them. Revision 0026 does for an event's id and kind (``drop_ids``): a reader takes them from
the log row it joins for the payload (``viewstore.store.read.logged_ids``).
"""

from __future__ import annotations

import os
import re
from typing import Any

import sqlalchemy as sa

from viewstore.store.database import revisions
from viewstore.store.read import lineage

#: View rows per transaction of ``drop_copies``; ``VIEWSTORE_MIGRATION_BATCH`` overrides it
#: (tests kill a migration half way through with small batches).
BATCH = 1000

# In id order: a run is the same each time (and a test can tell which fork comes when).
_FORKS = (
    "SELECT id, forked_from, fork_seq FROM conversations WHERE forked_from IS NOT NULL ORDER BY id"
)
# A fork's rows may name a wrong holder, not only none: see ``set_holders``.
_SET_HOLDER = (
    "UPDATE view_entries SET holder = :h WHERE conversation_id = :c AND seq > :a AND seq <= :b "
    "AND (holder IS NULL OR holder <> :h)"
)
# PostgreSQL: the conversation's row locked as an append to it, or a fork copying its rows,
# locks it. SQLite: the transaction holds the database's write lock already.
_LOCK = "SELECT id FROM conversations WHERE id = :c FOR UPDATE"
# The next batch's last key: the table's primary key read in order, from after the last one.
_AFTER = "(conversation_id > :c OR (conversation_id = :c AND order_key > :k))"
_NEXT_KEY = (
    f"SELECT conversation_id, order_key FROM view_entries WHERE {_AFTER} "
    "ORDER BY conversation_id, order_key LIMIT 1 OFFSET :n"
)
_BEFORE_EVERY_KEY = {"c": "", "k": ""}  # ids and keys are not empty
_DROP = (
    "UPDATE view_entries SET payload = NULL, source = NULL, timestamp = NULL, parent_id = NULL "
    f"WHERE {_AFTER} AND NOT is_summary AND payload IS NOT NULL"
)
_DROP_ENVELOPES = f"UPDATE view_entries SET envelope = NULL WHERE {_AFTER} AND envelope IS NOT NULL"
_DROP_IDS = (
    "UPDATE view_entries SET event_id = NULL, kind = NULL "
    f"WHERE {_AFTER} AND NOT is_summary AND event_id IS NOT NULL"
)
_UPTO = " AND (conversation_id < :d OR (conversation_id = :d AND order_key <= :l))"
_ONE = " AND conversation_id = :f"


def batch_size() -> int:
    return int(os.environ.get("VIEWSTORE_MIGRATION_BATCH", BATCH))


def set_holders(conn: sa.Connection) -> int:
    """Give each fork's rows of events in its sources' logs their ``holder``, one fork per
    transaction; returns the rows set.

    Workers go on forking meanwhile, and a fork copies its source's rows as they are: a row's
    holder, or else its source (``viewstore.store.lifecycle.forking``). A fork of a fork this
    has not reached yet thus names that fork for the events its sources' logs hold, where its
    log has no such seq, and its view read them as None (issue 37). So a row is set whenever
    its holder is not the one its lineage says, and the forks are listed again until a listing
    finds none not done yet. Each fork's row is locked first, as an append to it or a fork of it
    locks it: a fork that copied the rows before they were set has committed by then, and the
    next listing finds it; one made after copies them set."""
    done: set[str] = set()
    changed = 0
    while forks := [row for row in conn.execute(sa.text(_FORKS)) if row.id not in done]:
        for row in forks:
            if _locked(conn, row.id):
                for part in lineage.segments(conn, row)[:-1]:
                    params = {"h": part.conversation_id, "c": row.id, "a": part.after}
                    params["b"] = part.upto
                    changed += conn.execute(sa.text(_SET_HOLDER), params).rowcount
            conn.commit()
            done.add(row.id)
    conn.commit()
    return changed


def _locked(conn: sa.Connection, conversation_id: str) -> bool:
    """Lock the conversation's row for this transaction; False if it is gone (erased)."""
    if conn.dialect.name != "postgresql":
        return True
    return conn.execute(sa.text(_LOCK), {"c": conversation_id}).first() is not None


def drop_copies(conn: sa.Connection, batch: int | None = None) -> int:
    """Set the copies of events in view rows to NULL, ``batch`` rows per transaction; returns
    the batches run."""
    return _in_batches(conn, _DROP, batch)


def drop_envelopes(conn: sa.Connection, batch: int | None = None) -> int:
    """Set the rows' envelopes to NULL (revision 0023), ``batch`` rows per transaction; returns
    the batches run."""
    return _in_batches(conn, _DROP_ENVELOPES, batch)


def drop_ids(conn: sa.Connection, batch: int | None = None) -> int:
    """Set the ids and kinds of events in their view rows to NULL (revision 0026), ``batch``
    rows per transaction; returns the batches run."""
    return _in_batches(conn, _DROP_IDS, batch)


def _in_batches(conn: sa.Connection, statement: str, batch: int | None) -> int:
    """Run ``statement`` over the view rows in key order, ``batch`` rows per transaction, then
    over the rows of the forks made meanwhile (``_forks_made_since``); returns the batches."""
    size = batch or batch_size()
    forks = {str(row.id) for row in conn.execute(sa.text(_FORKS))}
    after: dict[str, Any] = dict(_BEFORE_EVERY_KEY)
    batches = 0
    while True:
        found = conn.execute(sa.text(_NEXT_KEY), {**after, "n": size - 1}).first()
        if found is None:  # the last batch: whatever is left
            conn.execute(sa.text(statement), after)
            conn.commit()
            break
        conn.execute(sa.text(statement + _UPTO), {**after, "d": found[0], "l": found[1]})
        conn.commit()
        after = {"c": found[0], "k": found[1]}
        batches += 1
    _forks_made_since(conn, forks, statement)
    return batches + 1


def _forks_made_since(conn: sa.Connection, known: set[str], statement: str) -> None:
    """Run ``statement`` over the rows of each fork not in ``known``, one fork per transaction,
    until a listing finds none. A fork made while the batches ran copied its source's rows as
    they were then, copies included, under keys the batches may have passed already (issue
    37: a fork's rows kept their payloads' copies, and then lost their ids to revision 0026).
    Each fork's row is locked first, as in ``set_holders``, so a fork copying from one of
    these is either seen by the next listing or copies rows already done."""
    while forks := [
        str(row.id) for row in conn.execute(sa.text(_FORKS)) if str(row.id) not in known
    ]:
        for fork in forks:
            if _locked(conn, fork):
                conn.execute(sa.text(statement + _ONE), {**_BEFORE_EVERY_KEY, "f": fork})
            conn.commit()
            known.add(fork)
    conn.commit()


def relock(conn: sa.Connection) -> None:
    """Take the migration lock again for the rest of the upgrade (the batches committed it)."""
    revisions.migration_lock(conn)


def sqlite_not_null(
    bind: sa.Connection, table: str, column: str, *, not_null: bool, type_: str = "TEXT"
) -> None:
    """Add or drop ``NOT NULL`` on a column of type ``type_`` (as the table's text spells it)
    in the table's stored text: SQLite cannot alter a column's constraint, and its documented
    way for a change that leaves every stored byte as it is, is to edit ``sqlite_schema`` under
    ``writable_schema``. The schema version is bumped so every connection reloads it."""
    sql = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)
    ).scalar_one()
    wanted = f"{column} {type_} NOT NULL" if not_null else f"{column} {type_}"
    changed = re.sub(rf"\b{column} {re.escape(type_)}( NOT NULL)?(?=,)", wanted, sql, count=1)
    if changed == sql:
        return
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    try:
        bind.execute(
            sa.text("UPDATE sqlite_schema SET sql = :s WHERE type = 'table' AND name = :n"),
            {"s": changed, "n": table},
        )
        bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def envelope_nullable(bind: sa.Connection, *, nullable: bool) -> None:
    """``view_entries.envelope`` may hold NULL (revision 0023) or not. Instant on both
    backends: no stored byte changes."""
    if bind.dialect.name == "sqlite":
        sqlite_not_null(bind, "view_entries", "envelope", not_null=not nullable)
    else:
        bind.exec_driver_sql(
            "ALTER TABLE view_entries ALTER COLUMN envelope "
            + ("DROP NOT NULL" if nullable else "SET NOT NULL")
        )


# The envelope as revisions 0003 to 0022 read it: the event id, U+001F, and a JSON array of the
# kind, role, source, timestamp, parent id, tool call id, LLM response id and thinking flag
# (their reader parses any spacing), packed from a view row ``r`` and the row ``e`` holding
# its event's fields (the log's; a summary's own row). A PostgreSQL ``::`` cast would read as
# a bound parameter, hence CAST.
_PACKED = {
    "sqlite": (
        "{r}.event_id || char(31) || '[' || json_quote({r}.kind) || ',' || json_quote({r}.role)"
        " || ',' || json_quote({e}.source) || ',' || json_quote({e}.timestamp) || ','"
        " || json_quote({e}.parent_id) || ',' || json_quote({r}.tool_call_id) || ','"
        " || json_quote({r}.llm_response_id) || ','"
        " || CASE WHEN {r}.thinking THEN 'true' ELSE 'false' END || ']'"
    ),
    "postgresql": (
        "{r}.event_id || chr(31) || CAST(json_build_array({r}.kind, {r}.role, {e}.source,"
        " {e}.timestamp, {e}.parent_id, {r}.tool_call_id, {r}.llm_response_id, {r}.thinking)"
        " AS text)"
    ),
}


def fill_envelopes(bind: sa.Connection) -> None:
    """Write back every row's envelope that is NULL, for the code of revisions before 0023,
    which reads it (a downgrade)."""
    packed = _PACKED[bind.dialect.name]
    row = "view_entries"
    bind.exec_driver_sql(
        f"""
        UPDATE view_entries SET envelope = (
            SELECT {packed.format(r=row, e="e")} FROM events e
            WHERE e.conversation_id = COALESCE(view_entries.holder, view_entries.conversation_id)
            AND e.seq = view_entries.seq)
        WHERE envelope IS NULL AND NOT is_summary
        """
    )
    bind.exec_driver_sql(
        f"UPDATE view_entries SET envelope = {packed.format(r=row, e=row)} "
        "WHERE envelope IS NULL AND is_summary"
    )


#: ``view_entries``' columns that name an event, as SQLite's stored text of the table spells
#: their types (revision 0026 makes them nullable).
_ID_COLUMNS = {"event_id": "VARCHAR(512)", "kind": "VARCHAR(255)"}


def ids_nullable(bind: sa.Connection, *, nullable: bool) -> None:
    """``view_entries.event_id`` and ``kind`` may hold NULL (revision 0026) or not. Instant on
    both backends: no stored byte changes."""
    for column, type_ in _ID_COLUMNS.items():
        if bind.dialect.name == "sqlite":
            sqlite_not_null(bind, "view_entries", column, not_null=not nullable, type_=type_)
        else:
            bind.exec_driver_sql(
                f"ALTER TABLE view_entries ALTER COLUMN {column} "
                + ("DROP NOT NULL" if nullable else "SET NOT NULL")
            )


def fill_ids(bind: sa.Connection) -> None:
    """Write back the id and kind of every event's row from its log row (the holder's, for a
    fork's copied row), for the code of revisions before 0026, which reads them (a
    downgrade)."""
    bind.exec_driver_sql(
        """
        UPDATE view_entries SET (event_id, kind) = (
            SELECT e.event_id, e.kind FROM events e
            WHERE e.conversation_id = COALESCE(view_entries.holder, view_entries.conversation_id)
            AND e.seq = view_entries.seq)
        WHERE event_id IS NULL
        """
    )
