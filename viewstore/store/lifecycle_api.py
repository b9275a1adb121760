"""``EventStore``'s lifecycle methods: erasing a conversation, its tombstone, and finding
the conversations a retention policy would erase (``viewstore prune``)."""

from __future__ import annotations

from datetime import UTC, datetime

from viewstore.errors import InvalidArgumentError
from viewstore.store import erasure
from viewstore.store.inputs import check_integer, conversation_key
from viewstore.store.records import Tombstone
from viewstore.store.store_core import ConversationId, StoreCore

MAX_REASON = 4096


class LifecycleMethods(StoreCore):
    def erase(self, conversation_id: ConversationId, *, reason: str) -> Tombstone:
        """Delete the conversation (its events, view and index rows, condensations and base
        state) in one transaction, leaving a :class:`Tombstone` with its event count, final
        chain hash, times and ``reason``. The id cannot be appended to again
        (``ConversationErasedError``); ``verify(against=...)`` reports an erased conversation
        a checkpoint saw as erased, not as tampering. Nothing else may delete from the log:
        the database refuses it (docs/threat-model.md)."""
        key = conversation_key(conversation_id)
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise InvalidArgumentError(
                f"reason must be non-empty text of at most {MAX_REASON} characters"
            )
        if "\x00" in reason:
            raise InvalidArgumentError("reason must not contain a NUL character")
        self._tails.drop(key)
        with self._write() as conn:
            return erasure.erase(conn, key, reason, datetime.now(UTC))

    def tombstone(self, conversation_id: ConversationId) -> Tombstone | None:
        """What is left of an erased conversation, or None if it was never erased."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return erasure.tombstone(conn, key)

    def inactive_conversations(self, *, before: datetime, limit: int = 1000) -> list[str]:
        """Up to ``limit`` conversations not appended to since ``before`` (an aware
        datetime), the longest inactive first."""
        if not isinstance(before, datetime) or before.tzinfo is None:
            raise InvalidArgumentError(f"before must be a timezone-aware datetime, got {before!r}")
        check_integer("limit", limit, minimum=1)
        with self._read() as conn:
            return erasure.inactive(conn, before, limit)
