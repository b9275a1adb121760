"""``EventStore``'s retention methods (docs/retention.md): compacting what every view has
forgotten (``compact``), and applying a retention policy (``apply_retention``: idle
conversations erased, the rest compacted and their old content redacted, each by its own
rules)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from viewstore.domain.errors import (
    ConversationErasedError,
    ConversationHasForksError,
    ConversationNotFoundError,
    InvalidArgumentError,
)
from viewstore.store.database.schema import conversations
from viewstore.store.inputs import MAX_SQL_INTEGER, check_integer, conversation_key
from viewstore.store.lifecycle import erasure
from viewstore.store.lifecycle.policy import render
from viewstore.store.lifecycle_api import LifecycleMethods, check_reason
from viewstore.store.read import reads
from viewstore.store.records import REDACTED_BY_POLICY, CompactionReport, RetentionReport
from viewstore.store.store_core import ConversationId

if TYPE_CHECKING:
    from viewstore.store.lifecycle.policy import RetentionPolicy

#: Idle conversations looked up per round of a policy's erasures.
EXPIRE_BATCH = 100
#: About how long one transaction of a compaction works before it commits (and, on SQLite,
#: lets writers in): the most a writer of the conversation (SQLite: any writer) waits for it.
BATCH_SECONDS = 0.05


class RetentionMethods(LifecycleMethods):
    def compact(
        self,
        conversation_id: ConversationId | None = None,
        *,
        older_than: timedelta,
        dry_run: bool = False,
        min_freed: int = 1,
        policy: str | None = None,
        batch: int = 500,
        pace: float = 2.0,
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
        chosen = policy if policy is not None else f"compact after {render(older_than)}"
        check_reason(chosen)
        if chosen.startswith(REDACTED_BY_POLICY):  # it would read as a redaction's record
            raise InvalidArgumentError(
                f"a compaction's policy must not start with {REDACTED_BY_POLICY!r}, got {chosen!r}"
            )
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
        redact: bool = False,
    ) -> None:
        """Compact ``key``'s own log batch by batch into ``tally``, resting ``pace`` times as
        long as each batch worked; ``redact``: redact it, by a policy's ``redact_after``
        (``compaction``)."""
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
                    redact=redact,
                )
            tally.add(done)
            # Rest in proportion to the work, as autovacuum's cost delay does: the writers
            # beside it get the CPU back (two cores run the sweeper's process and its server
            # backend), and on SQLite the one write lock the batch held (a writer's busy
            # handler polls, so it needs the gap to get in).
            time.sleep(pace * (time.monotonic() - began))

    def apply_retention(
        self, policy: RetentionPolicy, *, dry_run: bool = False, pace: float = 2.0
    ) -> RetentionReport:
        """Apply a retention policy (``viewstore.store.lifecycle.policy``, docs/retention.md)
        to the whole store: erase each source's conversations beyond the last
        ``keep_last`` appended to, and each conversation idle for longer than its
        ``delete_idle_after`` (forks before their sources, as ``viewstore prune`` does; a
        conversation the policy holds, ``delete_idle_after = "never"``, never), then
        compact each remaining conversation's forgotten events older than its
        ``compact_after``, then redact every event of its own log older than its
        ``redact_after``, live ones too (``[redacted]``, its metadata kept). A
        conversation's own rules replace the default's. ``dry_run``: what would go,
        nothing written (of the erasures, the first round: a source whose forks would go
        first is not listed)."""
        from viewstore.store.lifecycle import compaction  # noqa: PLC0415 - start-up time (event_store)
        from viewstore.store.lifecycle import policy as policies  # noqa: PLC0415 - start-up time

        if not isinstance(policy, policies.RetentionPolicy):
            raise InvalidArgumentError(f"policy must be a RetentionPolicy, got {policy!r}")
        _check_pace(pace)
        now = datetime.now(UTC)
        erased = self._expire(policy, now, dry_run)
        compacted, redacted = compaction.Tally(), compaction.Tally()
        seen = [0, 0]

        def sweep(key: str, period: timedelta, named: str, tally: Any, redact: bool) -> None:
            self._compact_conversation(
                key,
                cutoff=now - period,
                policy=f"{named}{policies.render(period)}",
                min_freed=1,
                dry_run=dry_run,
                skip_locked=True,
                batch=500,
                now=now,
                tally=tally,
                pace=pace,
                redact=redact,
            )

        for key in self._every_conversation():
            rules = policy.for_conversation(key)
            busy = compacted.busy
            if rules.compact_after is not None:
                sweep(key, rules.compact_after, "compact after ", compacted, False)
                seen[0] += 1
            # One another transaction held is left to the next run, and counted once.
            if rules.redact_after is not None and compacted.busy == busy:
                sweep(key, rules.redact_after, REDACTED_BY_POLICY, redacted, True)
                seen[1] += 1
        counts = compacted.counts()
        counts["unverifiable"] += redacted.unverifiable
        counts["busy"] += redacted.busy
        return RetentionReport(
            dry_run=dry_run,
            erased=tuple(erased),
            compacted_conversations=seen[0],
            **counts,
            redacted_conversations=seen[1],
            redacted=redacted.events,
            redacted_bytes=redacted.freed,
        )

    def _expire(self, policy: RetentionPolicy, now: datetime, dry_run: bool) -> list[str]:
        """The erasures a policy asks for: the conversations it names, by their own rule, then
        the rest by the default's, in rounds, oldest first."""
        found = self._keep_last(policy, dry_run)
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

    def _keep_last(self, policy: RetentionPolicy, dry_run: bool) -> list[str]:
        """Erase each source's conversations beyond the last ``keep_last`` appended to, a
        held one never, in rounds (a conversation with forks waits for them to go); the
        erased ids (dry run: of the first round)."""
        if policy.keep_last_per_source is None and not any(policy.sources.values()):
            return []
        found: list[str] = []
        while True:
            with self._read() as conn:
                beyond = [
                    (source, key, limit)
                    for source, key, rank in erasure.ranked_by_source(conn)
                    if (limit := policy.keep_last(source)) is not None
                    and rank > limit
                    and not policy.held(key)
                ]
            gone: list[str] = []
            for source, key, limit in beyond:
                if dry_run:
                    with self._read() as conn:
                        if not erasure.forks_of(conn, key):
                            gone.append(key)
                    continue
                reason = f"retention: beyond the last {limit} conversations of {source}"
                try:
                    if self.erase(key, reason=reason) is not None:
                        gone.append(key)
                except (ConversationHasForksError, ConversationNotFoundError,
                        ConversationErasedError):  # fmt: skip
                    pass  # a later round, once its forks are gone (or someone else erased it)
            found += gone
            if dry_run or not gone:
                return found

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


def _check_pace(pace: object) -> None:
    if isinstance(pace, bool) or not isinstance(pace, int | float) or not 0 <= pace <= 100:
        raise InvalidArgumentError(f"pace must be a number from 0 to 100, got {pace!r}")
