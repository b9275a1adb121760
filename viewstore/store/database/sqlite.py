"""What SQLite spells its own way, for the statements the store builds (the same names as
``postgresql.py``; ``backends.of(conn)`` picks the connection's)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Select
from sqlalchemy.dialects.sqlite import Insert
from sqlalchemy.dialects.sqlite import insert as _insert

NAME = "sqlite"


def insert(table: Any) -> Insert:
    """An ``INSERT`` that may say what to do on a conflict (``on_conflict_do_nothing`` /
    ``on_conflict_do_update``)."""
    return _insert(table)


def locked(query: Select[Any]) -> Select[Any]:
    """``query`` as it is: a writer's transaction began with ``BEGIN IMMEDIATE``, which holds
    the database's one write lock already."""
    return query


def json_text(column: str, key: str) -> str:
    """The text of ``key`` in the JSON document ``column`` holds (NULL if absent), as SQL."""
    return f"json_extract({column}, '$.{key}')"


def now(conn: Connection) -> datetime:
    """This process's clock: the database is a file on this machine."""
    return datetime.now(UTC)
