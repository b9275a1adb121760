"""``EventStore``'s methods for a store-backed agent server: the lease of the one server that
runs a conversation, and the server's metadata (viewstore/store/adapters/runners.py holds
their SQL; docs/agent-servers.md)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, delete, func, or_, select, update

from viewstore.domain.errors import InvalidArgumentError, RunnerHeldError, RunnerLostError
from viewstore.store.adapters.runners import (
    ORDERS,
    Order,
    aware_time,
    check_runner,
    check_ttl,
    fenced,
    lease_now,
    locked_row,
    status_sql,
    to_record,
    with_status,
)
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database.schema import base_states, conversations, server_conversations
from viewstore.store.inputs import check_integer, conversation_key, new_conversation_key
from viewstore.store.lifecycle.erasure import refuse_if_erased
from viewstore.store.read.reads import aware, comparable
from viewstore.store.records import RunnerClaim, ServerConversation
from viewstore.store.store_core import ConversationId, StoreCore


class RunnerMethods(StoreCore):
    def claim_runner(
        self, conversation_id: ConversationId, runner: str, *, ttl: float
    ) -> RunnerClaim:
        """Make ``runner`` the conversation's runner for ``ttl`` seconds (one transaction).
        Renews the lease if ``runner`` holds it; takes it over, one generation later, if it is
        free or expired; raises ``RunnerHeldError`` if another server holds it and it has not
        expired (nothing written). ``ConversationErasedError`` for an erased conversation."""
        key = new_conversation_key(conversation_id)
        check_runner(runner)
        span = check_ttl(ttl)
        with self._write() as conn:
            # The conversation row first, as an erasure locks it: a claim racing an erasure
            # waits for it and then finds the tombstone, leaving no lease of an erased one.
            lock_conversation(conn, key)
            refuse_if_erased(conn, key)
            now = lease_now(conn)
            row = locked_row(conn, key, now)
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
        span = check_ttl(ttl)
        with self._write() as conn:
            fenced(conn, key, check_runner(runner), generation)
            conn.execute(
                update(server_conversations)
                .where(server_conversations.c.conversation_id == key)
                .values(lease_expires_at=comparable(conn, lease_now(conn) + span))
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
                    table.runner == check_runner(runner),
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
        created = aware_time(created_at, "created_at")
        updated = aware_time(updated_at, "updated_at")
        with self._write() as conn:
            fenced(conn, key, check_runner(runner), generation)
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
                with_status(conn).where(server_conversations.c.conversation_id == key)
            ).first()
        return None if row is None else to_record(row)

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
        if order not in ORDERS:
            raise InvalidArgumentError(f"order must be one of {ORDERS}, got {order!r}")
        check_integer("limit", limit, minimum=1)
        table = server_conversations.c
        column = getattr(table, order)
        with self._read() as conn:
            query = with_status(conn).where(table.meta.is_not(None))
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
                query = query.where(status_sql(conn) == status)
            keys = (
                (column.desc(), table.conversation_id.desc())
                if descending
                else (
                    column,
                    table.conversation_id,
                )
            )
            rows = conn.execute(query.order_by(*keys).limit(limit)).all()
        return [to_record(row) for row in rows]

    def count_server_conversations(self, *, status: str | None = None) -> int:
        """How many conversations have server metadata (with ``status``, as above)."""
        table = server_conversations.c
        with self._read() as conn:
            query = select(func.count()).select_from(server_conversations)
            if status is not None:
                query = query.outerjoin(
                    base_states, base_states.c.conversation_id == table.conversation_id
                ).where(status_sql(conn) == status)
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
