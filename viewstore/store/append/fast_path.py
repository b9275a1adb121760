"""The append fast path: a conversation's next events written in one round, with no reads.

A plain append (no condensation) needs nothing from the database but the conversation's carried
state: the projector's ``ProjectionState`` and the last hash of the chain. The store keeps both
from the last append it committed to each conversation (its *tail*), so the next append can
skip the locked read and send every write at once, guarded by a compare-and-set on the
conversation row: ``UPDATE conversations ... WHERE version = <tail's> AND last_hash = <tail's>``.
If another writer got there first the guard matches no row, nothing is written, and the caller
takes the ordinary locked path. A duplicate event id fails the unique constraint, which also
leaves nothing behind and sends the caller to the ordinary path, which knows how to answer it.

PostgreSQL runs it as one statement in autocommit mode (data-modifying CTEs hanging off the
guard's ``RETURNING``): one round trip, atomic as every single statement is. A worker appending
to its own conversation thus pays about what a bare ``INSERT`` + ``COMMIT`` costs. SQLite has
no data-modifying CTEs but no round trips either: the same writes go straight to the driver
inside one ``BEGIN IMMEDIATE`` transaction. Both go to the driver through
viewstore/store/database/round_trip.py, which owns the transaction and the errors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import Dialect, Engine, Table

from viewstore.domain.events import Event
from viewstore.domain.projector import Projection, project
from viewstore.store.append import rows
from viewstore.store.append.tails import Tail
from viewstore.store.database.round_trip import (
    postgres_autocommit,
    sqlite_immediate,
    sqlite_timestamp,
)
from viewstore.store.database.schema import (
    conversations,
    events,
    manipulation_indices,
    view_entries,
)
from viewstore.store.database.translate import unique_violation
from viewstore.store.distribution import server_append

#: Longer batches take the ordinary path: the statement grows with the batch (one CTE per
#: closed index on PostgreSQL), and a long batch amortizes the extra read anyway.
BATCH_LIMIT = 100


@dataclass(frozen=True)
class Plan:
    """Every write of one fast append, computed before the database is touched."""

    key: str
    previous: Tail
    log: list[dict[str, Any]]
    projection: Projection
    tail: Tail
    now: datetime


def plan(
    key: str, tail: Tail, fresh: Sequence[Event], now: datetime, chain_key: bytes | None = None
) -> Plan:
    """The writes of appending ``fresh`` (no condensation among them) after ``tail``."""
    numbered = list(enumerate(fresh, start=tail.state.version + 1))
    now = rows.not_before(now, tail.recorded_at)
    log, last_hash = rows.log_rows(key, numbered, tail.last_hash, now, chain_key)
    projection = project(tail.state, numbered)
    return Plan(
        key, tail, log, projection, Tail(projection.state, last_hash, now, tail.prefix), now
    )


def _entry_rows(p: Plan) -> list[dict[str, Any]]:
    return [rows.entry_params(p.key, entry) for entry in p.projection.new_entries]


def _index_rows(p: Plan) -> list[dict[str, Any]]:
    return [
        {"conversation_id": p.key, "position": r.position, "from_seq": r.from_seq,
         "to_seq": r.to_seq}
        for r in p.projection.new_indices
    ]  # fmt: skip


def _closed_index_rows(p: Plan) -> list[dict[str, Any]]:
    return [
        {"conversation_id": p.key, "position": position, "to_seq": seq}
        for position, seq in p.projection.closed_indices.items()
    ]


# -- PostgreSQL: one statement ------------------------------------------------------------------


def _pg_type(dialect: Dialect, table: Table, column: str) -> str:
    # A collation (the order key's "C") belongs to the column, not to a cast. A length goes too:
    # an explicit cast to VARCHAR(n) silently cuts a longer value, while the assignment to the
    # column refuses it ("value too long"), as the ordinary path's INSERT does. The inputs are
    # checked against every limit before (viewstore.store.inputs); this keeps the database from
    # ever truncating should a value get past them.
    compiled = table.c[column].type.compile(dialect=dialect)
    return compiled.split(" COLLATE ")[0].split("(")[0]


@lru_cache(maxsize=1024)  # per dialect (engine), table and row count: few in practice
def _pg_insert(
    dialect: Dialect, name: str, table: Table, columns: tuple[str, ...], count: int
) -> str:
    """``name AS (INSERT ... SELECT guard.id, x.* FROM guard, (VALUES ...) AS x)``: one row
    per parameter tuple, each cast to its column's type (a NULL has no type of its own)."""
    types = [_pg_type(dialect, table, column) for column in columns]
    rows = ", ".join(
        "("
        + ", ".join(f"%({name}_{i}_{c})s::{t}" for c, t in zip(columns, types, strict=True))
        + ")"
        for i in range(count)
    )
    return (
        f"{name} AS (INSERT INTO {table.name} (conversation_id, {', '.join(columns)}) "
        f"SELECT guard.id, x.* FROM guard, (VALUES {rows}) AS x({', '.join(columns)}))"
    )


@cache
def _guard(columns: tuple[str, ...], placeholder: str) -> str:
    """The compare-and-set on the conversation row; ``placeholder`` spells a parameter in the
    driver's style (``%({})s`` or ``:{}``)."""
    sets = ", ".join(f"{c} = {placeholder.format('new_' + c)}" for c in columns)
    key, version, last_hash = (placeholder.format(n) for n in ("key", "old_version", "old_hash"))
    return (
        f"UPDATE conversations SET {sets} WHERE id = {key} "
        f"AND version = {version} AND last_hash = {last_hash}"
    )


def _guard_params(p: Plan, updated_at: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The guard's columns, and its parameters: the new state, and the tail it expects."""
    state = rows.state_values(p.tail.state, p.tail.last_hash)
    state["updated_at"] = updated_at
    params: dict[str, Any] = {f"new_{c}": v for c, v in state.items()}
    params.update(key=p.key, old_version=p.previous.state.version, old_hash=p.previous.last_hash)
    return tuple(state), params


# Closing is spelled as equalities on both index columns, one UPDATE per closed position (a
# plain append closes at most one): joined to a VALUES list instead, the planner scans every open
# index of the conversation and filters on position afterwards, an append cost growing with the
# view.
def _pg_close_index(number: int) -> str:
    return (
        f"closed_{number} AS (UPDATE manipulation_indices SET to_seq = %(closed_{number}_to_seq)s "
        f"FROM guard WHERE manipulation_indices.conversation_id = %(key)s "
        f"AND manipulation_indices.position = %(closed_{number}_position)s "
        "AND manipulation_indices.to_seq IS NULL)"
    )


def _pg_values(
    name: str, table_rows: list[dict[str, Any]], params: dict[str, Any]
) -> tuple[str, ...]:
    columns = tuple(c for c in table_rows[0] if c != "conversation_id")
    for i, row in enumerate(table_rows):
        for column in columns:
            params[f"{name}_{i}_{column}"] = row[column]
    return columns


def postgres_statement(dialect: Dialect, p: Plan) -> tuple[str, dict[str, Any]]:
    """The plan as one statement and its parameters."""
    columns, params = _guard_params(p, p.now)
    parts = [f"guard AS ({_guard(columns, '%({})s')} RETURNING id)"]
    for name, table, table_rows in (
        ("ins_events", events, p.log),
        ("ins_entries", view_entries, _entry_rows(p)),
        ("ins_indices", manipulation_indices, _index_rows(p)),
    ):
        if table_rows:
            columns = _pg_values(name, table_rows, params)
            parts.append(_pg_insert(dialect, name, table, columns, len(table_rows)))
    for number, (position, seq) in enumerate(p.projection.closed_indices.items()):
        params[f"closed_{number}_position"] = position
        params[f"closed_{number}_to_seq"] = seq
        parts.append(_pg_close_index(number))
    return "WITH " + ",\n".join(parts) + "\nSELECT count(*) FROM guard", params


def write_postgres(engine: Engine, p: Plan, *, server_function: bool = False) -> bool:
    """Run the plan as one autocommit statement (or, with ``server_function``, one call of
    ``viewstore_append_rows``: see ``server_append``); False when the guard found the tail stale
    or an id was already stored (the statement then did nothing).

    It goes to the driver directly: SQLAlchemy's per-statement work and its isolation-level
    switch around a checkout cost a third of the whole append here.
    """
    sql: str
    params: Any
    if server_function:
        sql, params = server_append.call(p)
    else:
        sql, params = postgres_statement(engine.dialect, p)
    with postgres_autocommit(engine) as driver:
        try:
            row = driver.execute(sql, params).fetchone()
        except engine.dialect.loaded_dbapi.Error as error:
            if unique_violation(error):  # an id already stored (in whatever form it is said)
                return False
            raise
    return row is not None and bool(row[0])


# -- SQLite: the same writes, straight to the driver ------------------------------------------


@cache
def _sqlite_insert(table: Table, columns: tuple[str, ...]) -> str:
    values = ", ".join(f":{c}" for c in columns)
    if table is events:
        # The single writer under BEGIN IMMEDIATE makes max + 1 safe (see rows.insert_events).
        return (
            f"INSERT INTO events ({', '.join(columns)}, position, txid) VALUES ({values}, "
            "(SELECT coalesce(max(position), 0) + 1 FROM events), 0)"
        )
    return f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({values})"


_SQLITE_CLOSE_INDEX = (
    "UPDATE manipulation_indices SET to_seq = :to_seq WHERE conversation_id = :conversation_id "
    "AND position = :position AND to_seq IS NULL"
)


@lru_cache(maxsize=64)
def _timestamp(dialect: Dialect) -> Any:
    return sqlite_timestamp(dialect, conversations.c.updated_at)


def write_sqlite(engine: Engine, p: Plan) -> bool:
    """Run the plan's writes in one ``BEGIN IMMEDIATE`` transaction on the driver's connection
    (viewstore/store/database/round_trip.py); False (rolled back, nothing written) when the
    guard found the tail stale or an id was already stored. The statements are made first,
    so that on aiosqlite the whole transaction is one hand-off to the connection's thread."""
    return sqlite_immediate(engine, _sqlite_writes(p, _timestamp(engine.dialect)(p.now)).run)


@dataclass(frozen=True)
class SqliteWrites:
    """One fast-path append's statements for sqlite3, made before the transaction opens."""

    guard: tuple[str, dict[str, Any]]
    log: tuple[str, list[dict[str, Any]]]
    then: list[tuple[str, list[dict[str, Any]]]]  # each run with executemany, in order

    def run(self, driver: Any) -> tuple[bool, bool]:
        """The writes on ``driver``, inside the transaction: whether to commit, twice (the
        append's result is the same)."""
        if driver.execute(*self.guard).rowcount != 1:
            return False, False
        try:
            driver.executemany(*self.log)
        except sqlite3.IntegrityError:
            return False, False
        for statement, params in self.then:
            driver.executemany(statement, params)
        return True, True


def _sqlite_writes(p: Plan, now: Any) -> SqliteWrites:
    columns, params = _guard_params(p, now)
    log = [{**row, "recorded_at": now} for row in p.log]
    then = [
        _sqlite_rows(view_entries, _entry_rows(p)),
        # Close before opening: a position closed and opened again in one batch has both rows.
        (_SQLITE_CLOSE_INDEX, _closed_index_rows(p)),
        _sqlite_rows(manipulation_indices, _index_rows(p)),
    ]
    return SqliteWrites(
        guard=(_guard(columns, ":{}"), params),
        log=_sqlite_rows(events, log),
        then=[(statement, params_) for statement, params_ in then if params_],
    )


def _sqlite_rows(
    table: Table, table_rows: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    if not table_rows:
        return "", []
    return _sqlite_insert(table, tuple(table_rows[0])), table_rows
