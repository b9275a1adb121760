"""Locking a conversation's row: what every write takes first (appends, forks, erasure, base
states, ownership). Apart from the append machinery (``rows``), so that the write paths that
need only the lock do not import it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, select

from viewstore.store.database import backends
from viewstore.store.database.schema import conversations


def lock_conversation(
    conn: Connection, conversation_id: str, *, skip_locked: bool = False
) -> Row[Any] | None:
    """Read the conversation row, locking it on PostgreSQL until the transaction ends.

    On SQLite the write transaction was opened with BEGIN IMMEDIATE, which already holds the
    database's single write lock; on PostgreSQL the row lock is the only lock an append takes,
    so writers to different conversations never wait for each other. ``skip_locked``: None,
    rather than a wait, when another transaction holds the row (PostgreSQL).
    """
    query = select(conversations).where(conversations.c.id == conversation_id)
    return conn.execute(backends.of(conn).locked(query, skip_locked=skip_locked)).first()
