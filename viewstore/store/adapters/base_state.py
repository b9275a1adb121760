"""Row-level SQL for a conversation's base state (the OpenHands SDK's ``base_state.json``).

Like ``rows``, every function takes an open ``Connection`` and never commits, but
``save_at_once``, which runs its own single statement on the driver.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select, text, update

from viewstore.domain.errors import ConcurrencyError, DamagedBaseStateError, InvalidArgumentError
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database import backends
from viewstore.store.database.round_trip import (
    postgres_autocommit,
    sqlite_immediate,
    sqlite_timestamp,
)
from viewstore.store.database.schema import base_states, conversations
from viewstore.store.records import BaseState, ConversationReport


def damage(payload: str) -> str | None:
    """Why ``payload`` is not a base state the SDK can load (None if it is one). Checked on
    every write and every read: a stored row can be changed behind the store's back."""
    try:
        value = json.loads(payload)
    except ValueError as e:
        return f"not valid JSON: {e}"
    if not isinstance(value, dict):
        return "not a JSON object"
    return None


def check_payload(payload: str | bytes) -> str:
    if isinstance(payload, bytes | bytearray):
        try:
            payload = bytes(payload).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidArgumentError(f"base state is not valid UTF-8: {e.reason}") from e
    if not isinstance(payload, str):
        raise InvalidArgumentError(f"base state must be JSON text, got {type(payload).__name__}")
    reason = damage(payload)
    if reason is not None:
        raise InvalidArgumentError(f"base state is {reason}")
    if "\x00" in payload:  # PostgreSQL text cannot hold it; JSON escapes it anyway
        raise InvalidArgumentError("base state must not contain a raw NUL character")
    return payload


def save(
    conn: Connection, conversation_id: str, payload: str, at_version: int, now: datetime
) -> int:
    """Store a new base state written by someone who had seen ``at_version`` events.

    The conversation row is locked first (as an append locks it), so a snapshot from a writer
    that fell behind (another process appended meanwhile) is refused with ``ConcurrencyError``
    instead of overwriting a newer HEAD. Returns the new revision.
    """
    row = lock_conversation(conn, conversation_id)
    version = 0 if row is None else int(row.version)
    if at_version != version:
        raise ConcurrencyError(conversation_id, at_version, version)
    current = conn.execute(
        select(base_states.c.revision).where(base_states.c.conversation_id == conversation_id)
    ).scalar()
    values = {"at_version": at_version, "payload": payload, "updated_at": now}
    if current is None:
        first = {"conversation_id": conversation_id, "revision": 1, **values}
        # Before the first event there is no conversation row to lock: two creators may race
        # here (PostgreSQL; SQLite's BEGIN IMMEDIATE serializes them), and the later snapshot
        # simply wins (their first appends then decide).
        statement = backends.of(conn).insert(base_states).values(first)
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=[base_states.c.conversation_id],
                set_={**values, "revision": base_states.c.revision + 1},
            )
        )
        return 1
    conn.execute(
        update(base_states)
        .where(base_states.c.conversation_id == conversation_id)
        .values(revision=base_states.c.revision + 1, **values)
    )
    return int(current) + 1


# The common case of ``save`` in one statement: the conversation exists, at ``at_version``.
# The guard's row lock orders it against appends as ``save``'s lock does.
_PG_SAVE = (
    "WITH guard AS (SELECT id FROM conversations WHERE id = %(c)s AND version = %(at)s "
    "FOR UPDATE) "
    "INSERT INTO base_states AS b (conversation_id, revision, at_version, payload, updated_at) "
    "SELECT %(c)s, 1, %(at)s, %(p)s, %(now)s FROM guard ON CONFLICT (conversation_id) DO "
    "UPDATE SET revision = b.revision + 1, at_version = excluded.at_version, "
    "payload = excluded.payload, updated_at = excluded.updated_at "
    "WHERE b.conversation_id = %(c)s RETURNING revision"  # routable by its conversation
)
_SQLITE_SAVE = (
    "UPDATE base_states SET revision = revision + 1, at_version = :at, payload = :p, "
    "updated_at = :now WHERE conversation_id = :c "
    "AND (SELECT version FROM conversations WHERE id = :c) = :at RETURNING revision"
)


def save_at_once(
    engine: Engine, conversation_id: str, payload: str, at_version: int, now: datetime
) -> int | None:
    """``save`` in one round trip where it is the common case (the conversation exists and is
    at ``at_version``; on SQLite, a base state is stored already): the new revision, or None
    having written nothing, for ``save`` to settle (a first write, a writer behind).

    It goes to the driver directly, as the append's fast path does: SQLAlchemy's transaction
    and statements around these few writes cost three times the writes on PostgreSQL.
    """
    params = {"c": conversation_id, "at": at_version, "p": payload}
    if engine.dialect.name == "postgresql":
        with postgres_autocommit(engine) as driver:
            row = driver.execute(_PG_SAVE, {**params, "now": now}).fetchone()
        return None if row is None else int(row[0])
    when = sqlite_timestamp(engine.dialect, base_states.c.updated_at)(now)

    def save(driver: Any) -> tuple[bool, int | None]:
        found = driver.execute(_SQLITE_SAVE, {**params, "now": when}).fetchone()
        return found is not None, None if found is None else int(found[0])

    return sqlite_immediate(engine, save)


def load(conn: Connection, conversation_id: str) -> BaseState | None:
    query = (
        select(*_COLUMNS)
        .select_from(
            # Both tables named by the id, not only joined: a sharded server routes by it.
            base_states.outerjoin(conversations, conversations.c.id == conversation_id)
        )
        .where(base_states.c.conversation_id == conversation_id)
    )
    row = conn.execute(query).first()
    if row is None:
        return None
    reason = damage(row.payload)
    if reason is not None:
        raise DamagedBaseStateError(conversation_id, reason)
    return _state(row)


def load_many(conn: Connection, conversation_ids: Sequence[str]) -> dict[str, BaseState]:
    """The base states of ``conversation_ids`` in one statement, by id: those never written
    are missing, and so are damaged ones (``load`` of one of them says why)."""
    if not conversation_ids:
        return {}
    query = (
        select(*_COLUMNS)
        .select_from(
            base_states.outerjoin(
                conversations, conversations.c.id == base_states.c.conversation_id
            )
        )
        .where(base_states.c.conversation_id.in_(list(conversation_ids)))
    )
    return {
        row.conversation_id: _state(row)
        for row in conn.execute(query)
        if damage(row.payload) is None
    }


_COLUMNS = (
    base_states.c.conversation_id,
    base_states.c.payload,
    base_states.c.revision,
    base_states.c.at_version,
    conversations.c.version,
)


def _state(row: Any) -> BaseState:
    return BaseState(
        conversation_id=row.conversation_id,
        payload=row.payload,
        revision=int(row.revision),
        at_version=int(row.at_version),
        version=int(row.version or 0),
    )


def check(
    conn: Connection,
    conversation_id: str,
    report: ConversationReport,
    may_read: bool | None = None,
) -> None:
    """``verify``'s finding on the conversation's stored base state: what ``load`` would
    refuse, as a problem instead of an error; a note where this role may not read it.
    ``may_read``: whether it may, when the caller asked already (verify of many
    conversations asks the server once per call, not once per conversation)."""
    if not (readable(conn) if may_read is None else may_read):
        report.notes.append(f"its base state was not checked: {_UNREADABLE}")
        return
    query = select(base_states.c.payload).where(base_states.c.conversation_id == conversation_id)
    payload = conn.execute(query).scalar()
    reason = None if payload is None else damage(payload)
    if reason is not None:
        report.problems.append(f"its stored base state is damaged: {reason}")


_UNREADABLE = "this database role may not read base_states"


def readable(conn: Connection) -> bool:
    """Whether this connection's role may read ``base_states``. The database's reader role,
    which the web viewer runs verify as, may not: it reads the viewer's tables, and a base
    state holds the agent's settings (docs/operations.md, "Roles")."""
    if conn.dialect.name != "postgresql":
        return True
    # Resolved through the connection's search_path, as the store's own statements are.
    query = text("SELECT has_table_privilege('base_states', 'SELECT')")
    return bool(conn.execute(query).scalar())


def without_conversation(conn: Connection) -> list[str]:
    """Ids of base states written before their conversation's first event (no conversation
    row): ``verify`` of the whole store checks them too (none where ``base_states`` cannot
    be read)."""
    if not readable(conn):
        return []
    query = (
        select(base_states.c.conversation_id)
        .where(
            ~select(conversations.c.id)
            .where(conversations.c.id == base_states.c.conversation_id)
            .exists()
        )
        .order_by(base_states.c.conversation_id)
    )
    return [str(key) for key in conn.execute(query).scalars()]
