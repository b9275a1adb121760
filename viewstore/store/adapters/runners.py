"""What a store-backed agent server keeps of a conversation (``server_conversations``, migration
0027): the server's metadata (its ``meta.json``) and the lease of the one server that runs the
conversation, with ``EventStore``'s methods for them (docs/agent-servers.md).

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

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, Row, and_, case, delete, func, or_, select, update

from viewstore.domain.errors import InvalidArgumentError, RunnerHeldError, RunnerLostError
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database import backends
from viewstore.store.database.schema import base_states, conversations, server_conversations
from viewstore.store.inputs import check_integer, conversation_key, new_conversation_key
from viewstore.store.lifecycle.erasure import refuse_if_erased
from viewstore.store.read.reads import aware, comparable
from viewstore.store.store_core import ConversationId, StoreCore

Order = Literal["created_at", "updated_at"]
_ORDERS = ("created_at", "updated_at")
_RUNNER_LIMIT = 255
#: The status the SDK gives a conversation whose base state names none.
_DEFAULT_STATUS = "idle"


@dataclass(frozen=True)
class RunnerClaim:
    """A lease claimed: its generation, and the server it was taken over from (None when it
    was free or already ours)."""

    generation: int
    taken_from: str | None


@dataclass(frozen=True)
class ServerConversation:
    """One conversation as a store-backed agent server keeps it."""

    conversation_id: str
    meta: str | None  # the server's meta.json, as it wrote it
    created_at: datetime
    updated_at: datetime
    runner: str | None  # the server holding the lease, None when released
    generation: int
    lease_expires_at: datetime | None
    execution_status: str | None = None  # in the stored base state (None: no base state)


def _check_runner(runner: object) -> str:
    if (
        not isinstance(runner, str)
        or not 0 < len(runner) <= _RUNNER_LIMIT
        or any(ord(c) < 32 for c in runner)
    ):
        raise InvalidArgumentError(
            f"runner must be a name of 1..{_RUNNER_LIMIT} printable characters, got {runner!r}"
        )
    return runner


def _check_ttl(ttl: object) -> timedelta:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= 86_400:
        raise InvalidArgumentError(f"ttl must be a number of seconds in (0, 86400], got {ttl!r}")
    return timedelta(seconds=float(ttl))


def _aware_time(value: object, name: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(f"{name} must be a datetime with a time zone")
    return value


def _now(conn: Connection) -> datetime:
    return backends.of(conn).now(conn)


def _locked_row(conn: Connection, key: str, now: datetime) -> Row[Any]:
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


def _fenced(conn: Connection, key: str, runner: str, generation: int) -> Row[Any]:
    query = select(server_conversations).where(server_conversations.c.conversation_id == key)
    row = conn.execute(backends.of(conn).locked(query)).first()
    if row is None or row.runner != runner or row.generation != generation:
        raise RunnerLostError(key, runner, generation)
    return row


def _record(row: Row[Any]) -> ServerConversation:
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


def _with_status(conn: Connection) -> Any:
    """The rows with the execution status of their base state (NULL without one)."""
    status = case((base_states.c.conversation_id.is_(None), None), else_=_status(conn))
    return select(server_conversations, status.label("execution_status")).outerjoin(
        base_states, base_states.c.conversation_id == server_conversations.c.conversation_id
    )


def _status(conn: Connection) -> Any:
    """The execution status in a conversation's stored base state, as SQL."""
    found = backends.of(conn).json_text("base_states.payload", "execution_status")
    return func.coalesce(found, _DEFAULT_STATUS)


class RunnerMethods(StoreCore):
    def claim_runner(
        self, conversation_id: ConversationId, runner: str, *, ttl: float
    ) -> RunnerClaim:
        """Make ``runner`` the conversation's runner for ``ttl`` seconds (one transaction).
        Renews the lease if ``runner`` holds it; takes it over, one generation later, if it is
        free or expired; raises ``RunnerHeldError`` if another server holds it and it has not
        expired (nothing written). ``ConversationErasedError`` for an erased conversation."""
        key = new_conversation_key(conversation_id)
        _check_runner(runner)
        span = _check_ttl(ttl)
        with self._write() as conn:
            # The conversation row first, as an erasure locks it: a claim racing an erasure
            # waits for it and then finds the tombstone, leaving no lease of an erased one.
            lock_conversation(conn, key)
            refuse_if_erased(conn, key)
            now = _now(conn)
            row = _locked_row(conn, key, now)
            holder, expires = row.runner, row.lease_expires_at
            alive = holder is not None and expires is not None and aware(expires) > now
            if holder is not None and holder != runner and alive:
                raise RunnerHeldError(key, holder, aware(expires).isoformat())
            generation = row.generation if holder == runner else row.generation + 1
            conn.execute(
                update(server_conversations)
                .where(server_conversations.c.conversation_id == key)
                .values(
                    runner=runner,
                    generation=generation,
                    lease_expires_at=comparable(conn, now + span),
                )
            )
        taken_from = holder if holder is not None and holder != runner else None
        return RunnerClaim(generation=generation, taken_from=taken_from)

    def renew_runner(
        self, conversation_id: ConversationId, runner: str, generation: int, *, ttl: float
    ) -> None:
        """Extend ``runner``'s lease by ``ttl`` seconds from now; ``RunnerLostError`` if the
        lease is no longer that runner's at that generation."""
        key = conversation_key(conversation_id)
        span = _check_ttl(ttl)
        with self._write() as conn:
            _fenced(conn, key, _check_runner(runner), generation)
            conn.execute(
                update(server_conversations)
                .where(server_conversations.c.conversation_id == key)
                .values(lease_expires_at=comparable(conn, _now(conn) + span))
            )

    def check_runner(self, conversation_id: ConversationId, runner: str, generation: int) -> None:
        """``RunnerLostError`` unless ``runner`` holds the lease at ``generation``."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            row = conn.execute(
                select(server_conversations.c.runner, server_conversations.c.generation).where(
                    server_conversations.c.conversation_id == key
                )
            ).first()
        if row is None or row.runner != runner or row.generation != generation:
            raise RunnerLostError(key, runner, generation)

    def release_runner(self, conversation_id: ConversationId, runner: str, generation: int) -> bool:
        """Let the conversation go: the lease is free at once for any server. False (nothing
        changed) if ``runner`` no longer held it at ``generation``."""
        key = conversation_key(conversation_id)
        table = server_conversations.c
        with self._write() as conn:
            done = conn.execute(
                update(server_conversations)
                .where(
                    table.conversation_id == key,
                    table.runner == _check_runner(runner),
                    table.generation == generation,
                )
                .values(runner=None, lease_expires_at=None)
            )
            return bool(done.rowcount)

    def save_server_meta(
        self,
        conversation_id: ConversationId,
        meta: str,
        *,
        runner: str,
        generation: int,
        created_at: datetime,
        updated_at: datetime,
    ) -> None:
        """Store the server's ``meta.json`` of the conversation and its times, if ``runner``
        holds the lease at ``generation`` (else ``RunnerLostError``, nothing written)."""
        key = conversation_key(conversation_id)
        if not isinstance(meta, str):
            raise InvalidArgumentError("meta must be the server's JSON text")
        created = _aware_time(created_at, "created_at")
        updated = _aware_time(updated_at, "updated_at")
        with self._write() as conn:
            _fenced(conn, key, _check_runner(runner), generation)
            conn.execute(
                update(server_conversations)
                .where(server_conversations.c.conversation_id == key)
                .values(
                    meta=meta,
                    created_at=comparable(conn, created),
                    updated_at=comparable(conn, updated),
                )
            )

    def server_conversation(self, conversation_id: ConversationId) -> ServerConversation | None:
        """The conversation's server row, or None."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            row = conn.execute(
                _with_status(conn).where(server_conversations.c.conversation_id == key)
            ).first()
        return None if row is None else _record(row)

    def base_state_signature(self, conversation_id: ConversationId) -> tuple[int, int] | None:
        """What changes whenever the conversation's base state as read changes (its revision,
        and the conversation's version, which a read catches the base state up to), without
        reading the payload; None without a base state."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            row = conn.execute(
                select(base_states.c.revision, conversations.c.version)
                .select_from(base_states)
                .outerjoin(conversations, conversations.c.id == base_states.c.conversation_id)
                .where(base_states.c.conversation_id == key)
            ).first()
        return None if row is None else (int(row.revision), int(row.version or 0))

    def server_conversations(
        self,
        *,
        order: Order = "created_at",
        descending: bool = False,
        start: ConversationId | None = None,
        limit: int = 100,
        status: str | None = None,
    ) -> list[ServerConversation]:
        """Conversations with server metadata in ``order`` (id breaks ties), from ``start`` on
        (that conversation included, as the servers' page ids are), at most ``limit``. Keyset
        paged on an index: a page costs the same with ten or a million conversations.
        ``status``: only those whose base state has that execution status (read from the
        base states row by row, so a filtered page scans until it is full)."""
        if order not in _ORDERS:
            raise InvalidArgumentError(f"order must be one of {_ORDERS}, got {order!r}")
        check_integer("limit", limit, minimum=1)
        table = server_conversations.c
        column = getattr(table, order)
        with self._read() as conn:
            query = _with_status(conn).where(table.meta.is_not(None))
            if start is not None:
                key = conversation_key(start)
                at = conn.execute(select(column).where(table.conversation_id == key)).scalar()
                if at is not None:
                    past = (
                        or_(column < at, and_(column == at, table.conversation_id <= key))
                        if descending
                        else or_(column > at, and_(column == at, table.conversation_id >= key))
                    )
                    query = query.where(past)
            if status is not None:
                query = query.where(_status(conn) == status)
            keys = (
                (column.desc(), table.conversation_id.desc())
                if descending
                else (
                    column,
                    table.conversation_id,
                )
            )
            rows = conn.execute(query.order_by(*keys).limit(limit)).all()
        return [_record(row) for row in rows]

    def count_server_conversations(self, *, status: str | None = None) -> int:
        """How many conversations have server metadata (with ``status``, as above)."""
        table = server_conversations.c
        with self._read() as conn:
            query = select(func.count()).select_from(server_conversations)
            if status is not None:
                query = query.outerjoin(
                    base_states, base_states.c.conversation_id == table.conversation_id
                ).where(_status(conn) == status)
            return int(conn.execute(query.where(table.meta.is_not(None))).scalar_one())

    def forget_server_conversation(self, conversation_id: ConversationId) -> bool:
        """Drop the conversation's server row (a server deleted it): its events, views and base
        state stay. False if there was none."""
        key = conversation_key(conversation_id)
        with self._write() as conn:
            done = conn.execute(
                delete(server_conversations).where(server_conversations.c.conversation_id == key)
            )
            return bool(done.rowcount)
