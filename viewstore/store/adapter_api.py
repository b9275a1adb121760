"""``EventStore``'s methods for adapters (viewstore.openhands): the SDK's base state, the
log's ids, the live-equals-resume check and a lock across processes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.adapters import base_state, locks
from viewstore.store.database.translate import translated
from viewstore.store.inputs import conversation_key
from viewstore.store.read import reads
from viewstore.store.records import BaseState
from viewstore.store.store_core import ConversationId, StoreCore

#: The most ids one ``base_states`` call reads (one statement's IN list).
MAX_BASE_STATES = 1000


class AdapterMethods(StoreCore):
    def save_base_state(
        self, conversation_id: ConversationId, payload: str | bytes, *, at_version: int
    ) -> int:
        """Store a conversation's base state (the SDK's ``base_state.json``), in one
        transaction; returns its revision.

        ``at_version`` is the number of events the writer has seen: if the conversation has
        moved on since, the snapshot is stale and ``ConcurrencyError`` is raised, nothing
        written (a stale HEAD would detach the newer events from the active branch).
        """
        key = conversation_key(conversation_id)
        text = base_state.check_payload(payload)
        if isinstance(at_version, bool) or not isinstance(at_version, int) or at_version < 0:
            raise InvalidArgumentError(
                f"at_version must be a non-negative integer, got {at_version!r}"
            )
        now = datetime.now(UTC)
        with translated():
            revision = base_state.save_at_once(self.engine, key, text, at_version, now)
        if revision is not None:
            return revision
        with self._write() as conn:
            return base_state.save(conn, key, text, at_version, now)

    def base_state(self, conversation_id: ConversationId) -> BaseState | None:
        """The newest base state with the conversation's version, or None if never written."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return base_state.load(conn, key)

    def base_states(self, conversation_ids: Iterable[ConversationId]) -> dict[str, BaseState]:
        """The base states of several conversations in one read, by id: one statement where
        :meth:`base_state` per id costs a transaction each (a listing page of a store-backed
        agent server). Ids without a base state, and those whose stored one is damaged
        (:meth:`base_state` raises for it), are missing from the result. At most 1,000 ids."""
        keys = list(dict.fromkeys(conversation_key(key) for key in conversation_ids))
        if len(keys) > MAX_BASE_STATES:
            raise InvalidArgumentError(
                f"base_states reads at most {MAX_BASE_STATES} conversations, got {len(keys)}"
            )
        with self._read() as conn:
            return base_state.load_many(conn, keys)

    def last_state_update(self, conversation_id: ConversationId, key: str) -> dict[str, Any] | None:
        """The payload of the newest ``ConversationStateUpdateEvent`` of field ``key`` in the
        conversation's log, or None if it has none (or the conversation is unknown). Filtered
        in SQL from the newest event back: the cost of a query, not of reading the log."""
        conversation = conversation_key(conversation_id)
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError(f"key must be a non-empty string, got {key!r}")
        with self._read() as conn:
            text = reads.last_state_update(conn, conversation, key)
        if text is None:
            return None
        payload: dict[str, Any] = json.loads(text)
        return payload

    def log_index(self, conversation_id: ConversationId) -> list[tuple[str, str, str | None]]:
        """``(event_id, kind, parent_id)`` of every event in seq order, without payloads
        (empty for an unknown conversation): what an adapter needs to list a log."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return reads.log_index(conn, key)

    def live_equals_resume(self, conversation_id: ConversationId) -> bool:
        """Whether the live view equals the resume view (``resume_view()``), decided from
        narrow columns without reading a payload (see ``viewstore.store.read.resume_check``)."""
        from viewstore.store.read import resume_check  # noqa: PLC0415 - start-up time (event_store)

        key = conversation_key(conversation_id)
        with self._read() as conn:
            reads.conversation_row(conn, key)
            return resume_check.live_equals_resume(conn, key)

    @contextmanager
    def conversation_lock(
        self, conversation_id: ConversationId, *, timeout: float = 30.0
    ) -> Iterator[None]:
        """Exclude other holders of this conversation's lock, in any process (see
        ``viewstore.store.adapters.locks``); ``TimeoutError`` after ``timeout`` seconds."""
        key = conversation_key(conversation_id)
        with translated(), locks.conversation_lock(self.engine, key, timeout):
            yield
