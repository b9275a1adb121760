"""What a store-backed agent server keeps of a conversation (``server_conversations``): the
server's metadata (its ``meta.json``) and the lease of the one server that runs the
conversation, as SQL; ``EventStore``'s methods for them are viewstore/store/runners_api.py's
(docs/agent-servers.md).

The lease is a row, not a file, so servers on different machines see one lease. A server
claims it before it resumes a conversation, renews it while it keeps the conversation open and
releases it when it lets it go. A claim of a lease another server holds is refused until the
lease expires; then the claim takes it over and ``generation`` grows by one. Every metadata
write names the generation it was made under and is refused if that is no longer the row's
(``RunnerLostError``): a server that stalled past its lease cannot write beside its successor.
The events themselves need no such check: each is appended at the version its file name gives
(viewstore.openhands.file_store), so of two writers the second is refused either way.

Times of the lease are the database's clock on PostgreSQL, so servers whose clocks disagree
still agree on when a lease ends; SQLite is one machine's file and uses that machine's clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, Row, String, case, func, literal_column, select

from viewstore.domain.errors import InvalidArgumentError, RunnerLostError
from viewstore.store.database import backends
from viewstore.store.database.schema import base_states, server_conversations
from viewstore.store.read.reads import aware, comparable
from viewstore.store.records import ServerConversation

Order = Literal["created_at", "updated_at"]
ORDERS = ("created_at", "updated_at")
_RUNNER_LIMIT = 255
#: The status the SDK gives a conversation whose base state names none.
_DEFAULT_STATUS = "idle"


def check_runner(runner: object) -> str:
    if (
        not isinstance(runner, str)
        or not 0 < len(runner) <= _RUNNER_LIMIT
        or any(ord(c) < 32 for c in runner)
    ):
        raise InvalidArgumentError(
            f"runner must be a name of 1..{_RUNNER_LIMIT} printable characters, got {runner!r}"
        )
    return runner


def check_ttl(ttl: object) -> timedelta:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= 86_400:
        raise InvalidArgumentError(f"ttl must be a number of seconds in (0, 86400], got {ttl!r}")
    return timedelta(seconds=float(ttl))


def aware_time(value: object, name: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(f"{name} must be a datetime with a time zone")
    return value


def lease_now(conn: Connection) -> datetime:
    return backends.of(conn).now(conn)


def locked_row(conn: Connection, key: str, now: datetime) -> Row[Any]:
    """The conversation's row, made if missing, locked until the transaction ends."""
    at = comparable(conn, now)
    conn.execute(
        backends.of(conn)
        .insert(server_conversations)
        .values(conversation_id=key, created_at=at, updated_at=at, generation=0)
        .on_conflict_do_nothing(index_elements=[server_conversations.c.conversation_id])
    )
    query = select(server_conversations).where(server_conversations.c.conversation_id == key)
    return conn.execute(backends.of(conn).locked(query)).one()


def fenced(conn: Connection, key: str, runner: str, generation: int) -> Row[Any]:
    query = select(server_conversations).where(server_conversations.c.conversation_id == key)
    row = conn.execute(backends.of(conn).locked(query)).first()
    if row is None or row.runner != runner or row.generation != generation:
        raise RunnerLostError(key, runner, generation)
    return row


def to_record(row: Row[Any]) -> ServerConversation:
    expires = row.lease_expires_at
    return ServerConversation(
        conversation_id=row.conversation_id,
        meta=row.meta,
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        runner=row.runner,
        generation=row.generation,
        lease_expires_at=None if expires is None else aware(expires),
        execution_status=row.execution_status,
    )


def with_status(conn: Connection) -> Any:
    """The rows with the execution status of their base state (NULL without one)."""
    status = case((base_states.c.conversation_id.is_(None), None), else_=status_sql(conn))
    return select(server_conversations, status.label("execution_status")).outerjoin(
        base_states, base_states.c.conversation_id == server_conversations.c.conversation_id
    )


def status_sql(conn: Connection) -> Any:
    """The execution status in a conversation's stored base state, as SQL."""
    found = backends.of(conn).json_text("base_states.payload", "execution_status")
    return func.coalesce(literal_column(found, type_=String), _DEFAULT_STATUS)
