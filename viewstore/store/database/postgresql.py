"""What PostgreSQL spells its own way, for the statements the store builds.

Each backend has one such module (this one, ``sqlite.py``) with the same names, and a
statement asks ``backends.of(conn)`` for its connection's: a difference longer than a line
between the two is written here, once, rather than as a branch where it is used.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Select, func, select
from sqlalchemy.dialects.postgresql import Insert
from sqlalchemy.dialects.postgresql import insert as _insert

NAME = "postgresql"


def insert(table: Any) -> Insert:
    """An ``INSERT`` that may say what to do on a conflict (``on_conflict_do_nothing`` /
    ``on_conflict_do_update``)."""
    return _insert(table)


def locked(query: Select[Any]) -> Select[Any]:
    """``query`` locking the rows it reads until the transaction ends: the row lock is the only
    lock a writer takes, so writers of different conversations never wait for each other."""
    return query.with_for_update()


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
