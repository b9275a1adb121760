"""What PostgreSQL spells its own way, for the statements the store builds.

Each backend has one such module (this one, ``sqlite.py``) with the same names, and a
statement asks ``backends.of(conn)`` for its connection's: a difference longer than a line
between the two is written here, once, rather than as a branch where it is used.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, FromClause, Select, func, select, true
from sqlalchemy.dialects.postgresql import Insert
from sqlalchemy.dialects.postgresql import insert as _insert

from viewstore.store.database.schema import events

NAME = "postgresql"


def insert(table: Any) -> Insert:
    """An ``INSERT`` that may say what to do on a conflict (``on_conflict_do_nothing`` /
    ``on_conflict_do_update``)."""
    return _insert(table)


def locked(query: Select[Any], *, skip_locked: bool = False) -> Select[Any]:
    """``query`` locking the rows it reads until the transaction ends: the row lock is the only
    lock a writer takes, so writers of different conversations never wait for each other.
    ``skip_locked``: rows another transaction holds are left out instead of waited for (the
    retention sweepers share the work so: docs/retention.md)."""
    return query.with_for_update(skip_locked=skip_locked)


def json_text(column: str, key: str) -> str:
    """The text of ``key`` in the JSON document ``column`` holds (NULL if absent), as SQL."""
    return f"({pg_json(column)} ->> '{key}')"


def now(conn: Connection) -> datetime:
    """The server's clock: every process of a fleet reads the same one."""
    found: datetime = conn.execute(select(func.clock_timestamp())).scalar_one()
    return found


def pg_json(column: str) -> str:
    """``column`` (JSON text) as PostgreSQL ``json``, the escape \\u0000 replaced by U+FFFD
    first: PostgreSQL's JSON functions refuse it anywhere in a document (text cannot hold NUL),
    though JSON allows it and a payload may hold it."""
    return (
        f"CAST(CASE WHEN strpos({column}, E'\\\\u0000') = 0 THEN {column} "
        f"ELSE replace(replace(replace({column}, E'\\\\\\\\', chr(1)), "
        "E'\\\\u0000', E'\\\\ufffd'), chr(1), E'\\\\\\\\') END AS json)"
    )


# Per-conversation reads are written so that their plan cannot depend on statistics: a store
# never analyzed (a fresh import; a partitioned parent, which autovacuum never analyzes)
# estimates one row for any conversation, and the planner then joined a view's rows to a scan
# of the conversation's whole log, or read the conversation with a list of keys as a filter:
# reads quadratic in the conversation's length (tests/store/test_unanalyzed_plans.py). A
# subquery behind OFFSET 0 is never merged into its query, so each row or key below is one
# lookup of the index its equalities name, whatever the estimates.


def log_join(on: str) -> str:
    """The log row ``e`` each view row ``v`` names (``on``: the condition), as one lookup of
    the log's primary key a row."""
    return f"LEFT JOIN LATERAL (SELECT * FROM events e WHERE {on} OFFSET 0) e ON true"


def log_rows(on: ColumnElement[bool]) -> tuple[FromClause, ColumnElement[bool]]:
    """``log_join`` for a statement built with SQLAlchemy: the log's rows and the join's
    condition."""
    return select(events).where(on).offset(0).lateral("e"), true()


def keyed(columns: str, source: str, where: str, column: str, keys: Iterable[str]) -> str:
    """``SELECT columns FROM source WHERE where AND column IN (...)``, the keys bound to the
    parameters named ``keys``, as one lookup a key."""
    listed = ", ".join(f"(:{key})" for key in keys)
    return (
        f"SELECT x.* FROM (VALUES {listed}) AS k(key) CROSS JOIN LATERAL "
        f"(SELECT {columns} FROM {source} WHERE {where} AND {column} = k.key OFFSET 0) AS x"
    )
