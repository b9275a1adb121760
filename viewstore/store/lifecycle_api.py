"""``EventStore``'s lifecycle methods: erasing a conversation, its tombstone, and finding
the conversations a retention policy would erase (``viewstore prune``)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, overload

from sqlalchemy import select

from viewstore.domain.errors import (
    ConversationErasedError,
    ConversationHasForksError,
    ConversationNotFoundError,
    InvalidArgumentError,
)
from viewstore.store.database.schema import conversations
from viewstore.store.inputs import (
    MAX_SQL_INTEGER,
    check_integer,
    conversation_key,
    new_conversation_key,
)
from viewstore.store.lifecycle import erasure
from viewstore.store.read import reads
from viewstore.store.records import (
    CompactionReport,
    ForkOrigin,
    Redaction,
    RetentionReport,
    Tombstone,
)
from viewstore.store.store_core import ConversationId, StoreCore

if TYPE_CHECKING:
    from viewstore.store.lifecycle.policy import RetentionPolicy

MAX_REASON = 4096
#: Idle conversations looked up per round of a policy's erasures.
EXPIRE_BATCH = 100
#: About how long one transaction of a compaction works before it commits (and, on SQLite,
#: lets writers in): the most a writer of the conversation (SQLite: any writer) waits for it.
BATCH_SECONDS = 0.05


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
        _check_reason(reason)
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

    def compact(
        self,
        conversation_id: ConversationId | None = None,
        *,
        older_than: timedelta,
        dry_run: bool = False,
        min_freed: int = 1,
        policy: str | None = None,
        batch: int = 500,
        pace: float = 1.0,
    ) -> CompactionReport:
        """Remove the content of every event that every view has forgotten and that was
        appended more than ``older_than`` ago, in ``conversation_id``'s own log, or in every
        conversation's (docs/retention.md).

        An event is taken when a condensation forgot it, no fork still holds it in its live
        view, and removing its content frees at least ``min_freed`` bytes (the record that
        proves the removal keeps a digest per string removed; a small event's can outweigh
        it: a negative ``min_freed`` compacts such events too). Its content becomes
        ``[compacted]``; its kind, ids, times, structure, numbers and hash stay, with a
        :class:`Redaction` record naming ``policy``. Views, indices, resume and the SDK's
        parsing are unchanged, as-of views and exports show the placeholder, ``verify``
        carries the chain across it; a fork whose view would hold it is refused
        (``CompactedHistoryError``).

        Online: each conversation is locked for at most ``batch`` events and about 50 ms of
        work at a time, one transaction each, so appends and forks go on between batches;
        after each it rests ``pace`` times as long as it worked (0: flat out), giving writers
        the CPU back (and on SQLite the one write lock). An interrupted run leaves whole
        batches done, and running it again goes on. Idempotent.
        Across the whole store on PostgreSQL, a conversation another transaction holds is
        skipped (``busy``), so many
        sweepers can run at once. ``dry_run``: what would go, nothing written."""
        from viewstore.store.lifecycle import compaction  # noqa: PLC0415 - start-up time (event_store)

        if not isinstance(older_than, timedelta) or older_than < timedelta(0):
            raise InvalidArgumentError(
                f"older_than must be a timedelta of zero or more, got {older_than!r}"
            )
        check_integer("min_freed", min_freed, minimum=-MAX_SQL_INTEGER)
        check_integer("batch", batch, minimum=1)
        _check_pace(pace)
        now = datetime.now(UTC)
        cutoff = now - older_than
        chosen = policy if policy is not None else f"compact after {_duration(older_than)}"
        _check_reason(chosen)
        named = None if conversation_id is None else conversation_key(conversation_id)
        tally = compaction.Tally()
        seen = 0
        if named is not None:
            with self._read() as conn:
                reads.conversation_row(conn, named)
            self._compact_conversation(
                named,
                cutoff=cutoff,
                policy=chosen,
                min_freed=min_freed,
                dry_run=dry_run,
                skip_locked=False,
                batch=batch,
                now=now,
                tally=tally,
                pace=pace,
            )
            seen = 1
        else:
            for key in self._every_conversation():
                self._compact_conversation(
                    key,
                    cutoff=cutoff,
                    policy=chosen,
                    min_freed=min_freed,
                    dry_run=dry_run,
                    skip_locked=True,
                    batch=batch,
                    now=now,
                    tally=tally,
                    pace=pace,
                )
                seen += 1
        return CompactionReport(
            cutoff=cutoff, policy=chosen, dry_run=dry_run, conversations=seen, **tally.counts()
        )

    def _every_conversation(self) -> Iterator[str]:
        """Every conversation id, in id order, read a page at a time (a sweep)."""
        from viewstore.store.lifecycle import compaction  # noqa: PLC0415 - start-up time (event_store)

        last: str | None = None
        while True:
            with self._read() as conn:
                page = compaction.conversation_ids(conn, last, 1000)
            if not page:
                return
            yield from page
            last = page[-1]

    def _compact_conversation(
        self,
        key: str,
        *,
        cutoff: datetime,
        policy: str,
        min_freed: int,
        dry_run: bool,
        skip_locked: bool,
        batch: int,
        now: datetime,
        tally: Any,
        pace: float,
    ) -> None:
        """Compact ``key``'s own log batch by batch into ``tally``, resting ``pace`` times as
        long as each batch worked."""
        from viewstore.store.lifecycle import compaction  # noqa: PLC0415 - start-up time (event_store)

        after: int | None = 0
        while after is not None:
            began = time.monotonic()
            with self._write() as conn:
                done, after = compaction.compact(
                    conn,
                    key,
                    after=after,
                    limit=batch,
                    budget=BATCH_SECONDS,
                    cutoff=cutoff,
                    policy=policy,
                    reason="retention",
                    min_freed=min_freed,
                    now=now,
                    chain_key=self._chain_key,
                    dry_run=dry_run,
                    skip_locked=skip_locked,
                )
            tally.add(done)
            # Rest in proportion to the work, as autovacuum's cost delay does: the writers
            # beside it get the CPU back (two cores run the sweeper's process and its server
            # backend), and on SQLite the one write lock the batch held (a writer's busy
            # handler polls, so it needs the gap to get in).
            time.sleep(pace * (time.monotonic() - began))

    def apply_retention(
        self, policy: RetentionPolicy, *, dry_run: bool = False, pace: float = 1.0
    ) -> RetentionReport:
        """Apply a retention policy (``viewstore.store.lifecycle.policy``, docs/retention.md)
        to the whole store: erase each conversation idle for longer than its
        ``delete_idle_after`` (forks before their sources, as ``viewstore prune`` does), then
        compact each remaining conversation's forgotten events older than its
        ``compact_after``. A conversation's own rules replace the default's. ``dry_run``:
        what would go, nothing written (of the erasures, the first round: a source whose
        forks would go first is not listed)."""
        from viewstore.store.lifecycle import compaction  # noqa: PLC0415 - start-up time (event_store)
        from viewstore.store.lifecycle import policy as policies  # noqa: PLC0415 - start-up time

        if not isinstance(policy, policies.RetentionPolicy):
            raise InvalidArgumentError(f"policy must be a RetentionPolicy, got {policy!r}")
        _check_pace(pace)
        now = datetime.now(UTC)
        erased = self._expire(policy, now, dry_run)
        tally = compaction.Tally()
        seen = 0
        for key in self._every_conversation():
            rules = policy.for_conversation(key)
            if rules.compact_after is None:
                continue
            self._compact_conversation(
                key,
                cutoff=now - rules.compact_after,
                policy=f"compact after {policies.render(rules.compact_after)}",
                min_freed=1,
                dry_run=dry_run,
                skip_locked=True,
                batch=500,
                now=now,
                tally=tally,
                pace=pace,
            )
            seen += 1
        return RetentionReport(
            dry_run=dry_run, erased=tuple(erased), compacted_conversations=seen, **tally.counts()
        )

    def _expire(self, policy: RetentionPolicy, now: datetime, dry_run: bool) -> list[str]:
        """The erasures a policy asks for: the conversations it names, by their own rule, then
        the rest by the default's, in rounds, oldest first."""
        found: list[str] = []
        for key, rules in sorted(policy.conversations.items()):
            if rules.delete_idle_after is not None and self._expire_one(
                key, now - rules.delete_idle_after, rules, dry_run
            ):
                found.append(key)
        period = policy.default.delete_idle_after
        if period is None:
            return found
        before = now - period
        passed: set[str] = set(policy.conversations)
        while True:
            with self._read() as conn:
                batch = erasure.inactive(conn, before, EXPIRE_BATCH + len(passed))
            fresh = [key for key in batch if key not in passed]
            if not fresh:
                return found
            for key in fresh:
                passed.add(key)
                if self._expire_one(key, before, policy.default, dry_run):
                    found.append(key)

    def _expire_one(self, key: str, before: datetime, rules: Any, dry_run: bool) -> bool:
        """Erase ``key`` if it was last appended to before ``before`` (checked under its lock)
        and has no forks; whether it went (would go)."""
        from viewstore.store.lifecycle import policy as policies  # noqa: PLC0415 - start-up time (event_store)

        if dry_run:
            with self._read() as conn:
                found = conn.execute(
                    select(conversations.c.updated_at).where(conversations.c.id == key)
                ).first()
                return (
                    found is not None
                    and reads.aware(found.updated_at) < before
                    and not erasure.forks_of(conn, key)
                )
        reason = f"retention: idle for {policies.render(rules.delete_idle_after)}"
        try:
            return self.erase(key, reason=reason, inactive_before=before) is not None
        except (ConversationHasForksError, ConversationNotFoundError, ConversationErasedError):
            return False

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
        _check_reason(reason)
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


def _check_pace(pace: object) -> None:
    if isinstance(pace, bool) or not isinstance(pace, int | float) or not 0 <= pace <= 100:
        raise InvalidArgumentError(f"pace must be a number from 0 to 100, got {pace!r}")


def _duration(period: timedelta) -> str:
    """``period`` as the command line writes one (30d, 12h, 30m, 45s), where it is whole."""
    seconds = int(period.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _check_reason(reason: object) -> None:
    if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
        raise InvalidArgumentError(
            f"reason must be non-empty text of at most {MAX_REASON} characters"
        )
    if "\x00" in reason:
        raise InvalidArgumentError("reason must not contain a NUL character")


def _check_aware(name: str, value: object) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(f"{name} must be a timezone-aware datetime, got {value!r}")
