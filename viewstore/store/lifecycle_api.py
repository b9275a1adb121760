"""``EventStore``'s lifecycle methods: erasing a conversation, its tombstone, and finding
the conversations a retention policy would erase (``viewstore prune``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import overload

from viewstore.domain.errors import (
    InvalidArgumentError,
)
from viewstore.store.inputs import (
    check_integer,
    conversation_key,
    new_conversation_key,
)
from viewstore.store.lifecycle import erasure
from viewstore.store.read import reads
from viewstore.store.records import (
    ForkOrigin,
    Redaction,
    Tombstone,
)
from viewstore.store.store_core import ConversationId, StoreCore

MAX_REASON = 4096


class LifecycleMethods(StoreCore):
    def fork(
        self,
        source: ConversationId,
        at_seq: int,
        new_id: ConversationId | None = None,
    ) -> str:
        """A new conversation whose first ``at_seq`` events are ``source``'s, and which then
        lives on its own; returns its id (``new_id``, else a new UUID).

        The prefix is shared, not copied: only the view and index rows alive right after
        ``at_seq`` are written under the new id, so a fork costs O(view) rows whatever the
        history's length. The fork's view, indices and request flag right after ``at_seq``
        are ``source``'s as of ``at_seq``; ``events()``, ``view(as_of=...)`` (inside the
        prefix too), ``verify`` (the chain runs through the prefix), ``rebuild`` and export
        read the prefix from the source. A conversation with forks cannot be erased
        (``ConversationHasForksError``): erase the forks first. See docs/lifecycle.md.

        On a store distributed over Citus, a fork given no ``new_id`` gets one that the
        cluster places on its source's shard, so a family stays on one node
        (docs/distribution.md)."""
        from viewstore.store.lifecycle import forking  # noqa: PLC0415 - start-up time (event_store)

        key = conversation_key(source)
        check_integer("at_seq", at_seq, minimum=1)
        with self._write() as conn:
            if new_id is not None:
                fresh = new_conversation_key(new_id)
            else:
                fresh = self._layout.fork_id(conn, key)
            forking.fork(conn, key, at_seq, fresh, datetime.now(UTC))
        return fresh

    def redact(
        self,
        conversation_id: ConversationId,
        event_id: str,
        *,
        reason: str,
        paths: Iterable[str] | None = None,
    ) -> Redaction:
        """Remove the content of one event, or only the strings under ``paths`` (JSON
        Pointers such as ``/observation/content``), from the log and from every copy the
        store keeps (view rows, a condensation's summary, the forks that share the event),
        in one transaction. The event's structure stays (the envelope the view is built
        from; at any depth the names of types, roles and tools, ids and enumerated states), so
        views, indices and the request flag do not change and the OpenHands SDK still reads
        the event; a path at or into any of it is refused with ``UnredactablePathError``, and
        a path at an object redacts what is inside it but that structure. Each redaction leaves
        a :class:`Redaction` record; ``verify`` reports a redacted event as redacted, carries
        the hash chain across it, and still finds any other change (docs/lifecycle.md).

        ``event_id`` may be in a fork's shared prefix: the event is then redacted in its
        source, and so in every fork that shares it."""
        from viewstore.store.lifecycle import redaction  # noqa: PLC0415 - start-up time (event_store)

        key = conversation_key(conversation_id)
        check_reason(reason)
        if not isinstance(event_id, str) or not event_id:
            raise InvalidArgumentError(f"event_id must be a non-empty string, got {event_id!r}")
        chosen = None
        if paths is not None:
            chosen = [paths] if isinstance(paths, str) else list(paths)
            if not chosen:
                raise InvalidArgumentError("paths must name at least one JSON Pointer, or be None")
        with self._write() as conn:
            return redaction.redact(
                conn,
                key,
                event_id,
                reason=reason,
                paths=chosen,
                now=datetime.now(UTC),
                chain_key=self._chain_key,
            )

    def redactions(self, conversation_id: ConversationId) -> list[Redaction]:
        """The redaction records of the conversation's events (its shared prefix included),
        in seq order."""
        from viewstore.store.lifecycle import redaction  # noqa: PLC0415 - start-up time (event_store)

        key = conversation_key(conversation_id)
        with self._read() as conn:
            row = reads.conversation_row(conn, key)
            found = redaction.lineage_records(conn, row)
        return [record for seq in sorted(found) for record in found[seq]]

    def fork_origin(self, conversation_id: ConversationId) -> ForkOrigin | None:
        """Where the conversation was forked from, or None if it is not a fork."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            row = reads.conversation_row(conn, key)
        if row.forked_from is None:
            return None
        return ForkOrigin(row.forked_from, int(row.fork_seq), row.family_id)

    def forks(self, conversation_id: ConversationId) -> list[str]:
        """The conversations forked directly from this one."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            reads.conversation_row(conn, key)
            return erasure.forks_of(conn, key)

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
        check_reason(reason)
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


def check_reason(reason: object) -> None:
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
        raise InvalidArgumentError(
            f"reason must be non-empty text of at most {MAX_REASON} characters"
        )
    if "\x00" in reason:
        raise InvalidArgumentError("reason must not contain a NUL character")


def _check_aware(name: str, value: object) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(f"{name} must be a timezone-aware datetime, got {value!r}")
