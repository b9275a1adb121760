"""What SQLite spells its own way, for the statements the store builds (the same names as
``postgresql.py``; ``backends.of(conn)`` picks the connection's)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, FromClause, Select
from sqlalchemy.dialects.sqlite import Insert
from sqlalchemy.dialects.sqlite import insert as _insert

from viewstore.store.database.schema import events

NAME = "sqlite"


def insert(table: Any) -> Insert:
    """An ``INSERT`` that may say what to do on a conflict (``on_conflict_do_nothing`` /
    ``on_conflict_do_update``)."""
    return _insert(table)


def locked(query: Select[Any], *, skip_locked: bool = False) -> Select[Any]:
    """``query`` as it is: a writer's transaction began with ``BEGIN IMMEDIATE``, which holds
    the database's one write lock already (so no other writer holds a row to skip)."""
    return query


def json_text(column: str, key: str) -> str:
    """The text of ``key`` in the JSON document ``column`` holds (NULL if absent), as SQL."""
    return f"json_extract({column}, '$.{key}')"


def now(conn: Connection) -> datetime:
    """This process's clock: the database is a file on this machine."""
    return datetime.now(UTC)


def log_join(on: str) -> str:
    """The log row ``e`` each view row ``v`` names (``on``: the condition). SQLite's planner
    looks a join's inner rows up by the index its equalities name, statistics or none."""
    return f"LEFT JOIN events e ON {on}"


def log_rows(on: ColumnElement[bool]) -> tuple[FromClause, ColumnElement[bool]]:
    """``log_join`` for a statement built with SQLAlchemy: the log's rows and the join's
    condition."""
    return events, on


def keyed(columns: str, source: str, where: str, column: str, keys: Iterable[str]) -> str:
    """``SELECT columns FROM source WHERE where AND column IN (...)``, the keys bound to the
    parameters named ``keys``."""
    listed = ", ".join(f":{key}" for key in keys)
    return f"SELECT {columns} FROM {source} WHERE {where} AND {column} IN ({listed})"
