"""``EventStore``'s lifecycle methods: erasing a conversation, its tombstone, and finding
the conversations a retention policy would erase (``viewstore prune``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from viewstore.errors import InvalidArgumentError
from viewstore.store import erasure
from viewstore.store.inputs import check_integer, conversation_key
from viewstore.store.records import Tombstone
from viewstore.store.store_core import ConversationId, StoreCore

MAX_REASON = 4096


class LifecycleMethods(StoreCore):
    @overload
    def erase(self, conversation_id: ConversationId, *, reason: str) -> Tombstone: ...

    @overload
    def erase(
        self, conversation_id: ConversationId, *, reason: str, inactive_before: datetime
    ) -> Tombstone | None: ...

    def erase(
        self,
        conversation_id: ConversationId,
        *,
        reason: str,
        inactive_before: datetime | None = None,
    ) -> Tombstone | None:
        """Delete the conversation (its events, view and index rows, condensations and base
        state) in one transaction, leaving a :class:`Tombstone` with its event count, final
        chain hash, times and ``reason``. The id cannot be appended to again
        (``ConversationErasedError``); ``verify(against=...)`` reports an erased conversation
        a checkpoint saw as erased, not as tampering. Nothing else may delete from the log:
        the database refuses it (docs/threat-model.md).

        ``inactive_before`` (an aware datetime): erase only if the conversation was last
        appended to before then, checked under the conversation's lock; otherwise nothing is
        erased and None returned (a retention policy must not erase a conversation that came
        back to life while it ran)."""
        key = conversation_key(conversation_id)
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise InvalidArgumentError(
                f"reason must be non-empty text of at most {MAX_REASON} characters"
            )
        if "\x00" in reason:
            raise InvalidArgumentError("reason must not contain a NUL character")
        if inactive_before is not None:
            _check_aware("inactive_before", inactive_before)
        self._tails.drop(key)
        with self._write() as conn:
            return erasure.erase(conn, key, reason, datetime.now(UTC), inactive_before)

    def tombstone(self, conversation_id: ConversationId) -> Tombstone | None:
        """What is left of an erased conversation, or None if it was never erased."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return erasure.tombstone(conn, key)

    def inactive_conversations(self, *, before: datetime, limit: int = 1000) -> list[str]:
        """Up to ``limit`` conversations not appended to since ``before`` (an aware
        datetime), the longest inactive first."""
        _check_aware("before", before)
        check_integer("limit", limit, minimum=1)
        with self._read() as conn:
            return erasure.inactive(conn, before, limit)


def _check_aware(name: str, value: object) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(f"{name} must be a timezone-aware datetime, got {value!r}")
