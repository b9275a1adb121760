"""Compaction (retention, docs/retention.md): remove the content of the events that every view
has forgotten, keep everything else.

An event is compacted when its own view row has left the view (a condensation forgot it), no
conversation sharing it (a fork) still holds it in its live view, it was appended before the
policy's cutoff, and removing its content frees bytes. The removal is a redaction of all its
content (``redaction.plan``, ``record_values``, ``write_removals``) whose strings read
``[compacted]`` and whose record names the policy: the envelope and structure stay, so views,
indices, as-of reads, resume and the OpenHands SDK's parsing are unchanged, and ``verify``
carries the chain across it and checks the payload against what was hashed at append, as
after a redaction.

The resume view is the live view less what enforcement removes (docs/concepts.md), so an event
no live view holds is in no resume view either: only live views are consulted.

A policy's ``redact_after`` rule (``redact=True``) goes through the same batches, locks and
tally, with three differences: it takes every event appended before its cutoff, those live
views hold included (condensations excepted, as here: they carry the summaries and the
forgotten ids); its strings read ``[redacted]``, as after ``store.redact``, so a fork over
such an event is not refused; and it is done whatever it frees (it is for privacy, not room).
Its record names the policy as ``redact after 90d`` (``records.REDACTED_BY_POLICY``): how
``Redaction.compacted`` and ``redaction.compaction_records`` tell it from a compaction's.

Each call works on one conversation in the caller's transaction, from a seq onwards, for a
bounded number of events and a bounded time: the conversation is locked for that batch only,
so appends, forks and reads go on between batches, and a sweeper killed mid-run leaves whole
batches done (a record and its payload change commit together) and starts again where it
finds work.

Like ``rows``, every function takes an open ``Connection`` and never commits.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, exists, select

from viewstore.domain.chain import GENESIS
from viewstore.domain.errors import ChainMismatchError, InvalidArgumentError
from viewstore.domain.scrub import COMPACTED, MARK
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database.schema import (
    condensations,
    conversations,
    events,
    redactions,
    view_entries,
)
from viewstore.store.lifecycle.redaction import (
    Located,
    Removal,
    database_user,
    lock_holders,
    plan,
    record_values,
    records_of,
    write_removals,
)
from viewstore.store.read import reads
from viewstore.store.records import Redaction

#: Events read per statement (a bound parameter each).
_CHUNK = 200


@dataclass
class Tally:
    """What one batch did (or, in a dry run, would do)."""

    events: int = 0  # compacted (or redacted)
    freed: int = 0  # bytes of payload, less the records' leaf digests
    small: int = 0  # left: removing their content would free less than the minimum
    unverifiable: int = 0  # left: their link in the chain does not hold, or cannot be checked
    busy: int = 0  # conversations another transaction held (PostgreSQL): not looked at

    def add(self, other: Tally) -> None:
        self.events += other.events
        self.freed += other.freed
        self.small += other.small
        self.unverifiable += other.unverifiable
        self.busy += other.busy

    def counts(self) -> dict[str, int]:
        """As the reports name them."""
        return {
            "events": self.events,
            "bytes_freed": self.freed,
            "small": self.small,
            "unverifiable": self.unverifiable,
            "busy": self.busy,
        }


def _forgotten(conn: Connection, key: str, after: int) -> list[int]:
    """Seqs after ``after`` of ``key``'s own events whose view row has left the view."""
    query = select(view_entries.c.seq).where(
        view_entries.c.conversation_id == key,
        view_entries.c.holder.is_(None),
        view_entries.c.is_summary.is_(False),
        view_entries.c.left_seq.is_not(None),
        view_entries.c.seq > after,
    )
    return sorted({int(seq) for seq in conn.scalars(query)})


def _held(conn: Connection, key: str, forks: Sequence[str]) -> set[int]:
    """Seqs of ``key``'s events that a fork still holds in its live view (the open rows, read
    by their partial index)."""
    found: set[int] = set()
    for fork in forks:
        query = select(view_entries.c.seq).where(
            view_entries.c.conversation_id == fork,
            view_entries.c.left_seq.is_(None),
            view_entries.c.holder == key,
        )
        found.update(int(seq) for seq in conn.scalars(query))
    return found


def _emptied(conn: Connection, key: str, after: int) -> set[int]:
    """Seqs after ``after`` of ``key``'s events a record shows have no content left: a round
    took all of it (a compaction, a policy's or a user's whole-content redaction)."""
    query = select(redactions.c.seq).where(
        redactions.c.conversation_id == key,
        redactions.c.seq > after,
        redactions.c.paths.is_(None),
    )
    return {int(seq) for seq in conn.scalars(query)}


def _unredacted(conn: Connection, key: str, after: int, cutoff: datetime, limit: int) -> list[int]:
    """The first ``limit`` seqs after ``after`` of ``key``'s own events appended before
    ``cutoff``, live or forgotten, but condensations and events with no content left (what
    ``_emptied`` names): filtered here, not after, so that a full page means more may follow."""
    emptied = exists().where(
        redactions.c.conversation_id == key,
        redactions.c.seq == events.c.seq,
        redactions.c.paths.is_(None),
    )
    condensation = exists().where(
        condensations.c.conversation_id == key, condensations.c.seq == events.c.seq
    )
    query = (
        select(events.c.seq)
        .where(
            events.c.conversation_id == key,
            events.c.seq > after,
            events.c.recorded_at < cutoff,
            ~emptied,
            ~condensation,
        )
        .order_by(events.c.seq)
        .limit(limit)
    )
    return [int(seq) for seq in conn.scalars(query)]


def _choose(
    conn: Connection, key: str, *, after: int, cutoff: datetime, limit: int, redact: bool
) -> list[int]:
    """The seqs of the locked ``key``'s events a batch takes, once it has locked the forks
    sharing them."""
    if redact:
        candidates = _unredacted(conn, key, after, cutoff, limit)
    else:
        candidates = _forgotten(conn, key, after)
    if not candidates:
        return []
    # Ancestors before descendants, as every writer of a family locks them (``store.redact``
    # too: so a redaction here waits for, and is waited for by, the same writers).
    holders = lock_holders(conn, key, candidates[0])
    if redact:  # the log row is what every fork sharing the event reads, as after redact
        return candidates
    skip = _held(conn, key, holders[1:]) | _emptied(conn, key, after)
    return [seq for seq in candidates if seq not in skip][:limit]


def compact(
    conn: Connection,
    key: str,
    *,
    after: int,
    limit: int,
    budget: float,
    cutoff: datetime,
    policy: str,
    reason: str,
    min_freed: int,
    now: datetime,
    chain_key: bytes | None,
    dry_run: bool,
    skip_locked: bool,
    redact: bool = False,
) -> tuple[Tally, int | None]:
    """Compact up to ``limit`` of ``key``'s events after seq ``after``, for about ``budget``
    seconds of work at most (the conversation stays locked that long: on SQLite, the whole
    database); the tally and the seq to go on after (None: the conversation is done, or
    gone). ``skip_locked``: a conversation another transaction holds is left
    (``Tally.busy``) rather than waited for. ``redact``: a policy's ``redact_after`` (this
    module), ``min_freed`` aside."""
    tally = Tally()
    deadline = time.monotonic() + budget
    if lock_conversation(conn, key, skip_locked=skip_locked) is None:
        tally.busy = int(skip_locked and reads.exists(conn, key))
        return tally, None
    chosen = _choose(conn, key, after=after, cutoff=cutoff, limit=limit, redact=redact)
    by = database_user(conn)
    last: int | None = None  # the last seq looked at
    for start in range(0, len(chosen), _CHUNK):
        chunk = chosen[start : start + _CHUNK]
        records: list[dict[str, Any]] = []
        payloads: list[str] = []
        for row, removal in _plans(
            conn,
            key,
            chunk,
            cutoff=cutoff,
            chain_key=chain_key,
            tally=tally,
            mark=MARK if redact else COMPACTED,
        ):
            last = int(row.seq)
            if removal is not None:
                freed = removal.freed - _record_bytes(key, row.event_id, reason, policy)
                if freed < min_freed and not redact:
                    tally.small += 1
                else:
                    records.append(
                        record_values(
                            removal,
                            reason=reason,
                            policy=policy,
                            now=now,
                            by=by,
                            chain_key=chain_key,
                        )
                    )
                    payloads.append(removal.payload)
                    tally.events += 1
                    tally.freed += freed
            if time.monotonic() > deadline:
                break
        if not dry_run:
            # An event's view rows hold no copy of its payload (docs/schema.md), and only
            # events, never condensations, are compacted or redacted here: the log row is the
            # only copy.
            write_removals(conn, records, payloads)
        if time.monotonic() > deadline and last is not None and last != chosen[-1]:
            return tally, last
    if len(chosen) < limit or not chosen:
        return tally, None
    return tally, chosen[-1]


def _plans(
    conn: Connection,
    key: str,
    chunk: list[int],
    *,
    cutoff: datetime,
    chain_key: bytes | None,
    tally: Tally,
    mark: str,
) -> Iterator[tuple[Any, Removal | None]]:
    """Each event of ``chunk`` appended before ``cutoff``, and what removing its content by
    ``mark`` would write (None: nothing is left to remove, or its link cannot be checked,
    counted in ``tally``)."""
    query = (
        select(events.c.seq, events.c.event_id, events.c.payload, events.c.hash)
        .where(
            events.c.conversation_id == key,
            events.c.seq.in_(chunk),
            events.c.recorded_at < cutoff,
        )
        .order_by(events.c.seq)
    )
    found = conn.execute(query).all()
    previous = _hashes(conn, key, [int(row.seq) - 1 for row in found])
    earlier = _records(conn, key, [int(row.seq) for row in found])
    for row in found:
        seq = int(row.seq)
        at = Located(key, seq, row.payload, row.hash)
        try:
            removal = plan(
                conn,
                at,
                row.event_id,
                None,
                chain_key=chain_key,
                mark=mark,
                earlier=earlier.get(seq, []),
                previous=previous.get(seq - 1),
            )
        except (ChainMismatchError, InvalidArgumentError):
            # A damaged link, or an event hashed before scheme 2 in a store without a chain
            # key: verify names the first, the second cannot be compacted provably.
            tally.unverifiable += 1
            removal = None
        yield row, removal


def _hashes(conn: Connection, key: str, seqs: list[int]) -> dict[int, str]:
    """The chain hashes of ``key``'s own events at ``seqs`` (GENESIS for 0). One before a
    fork's first own event is in its source's log: left out, for ``plan`` to read."""
    found = {0: GENESIS} if 0 in seqs else {}
    query = select(events.c.seq, events.c.hash).where(
        events.c.conversation_id == key, events.c.seq.in_([s for s in seqs if s > 0])
    )
    found.update({int(row.seq): row.hash for row in conn.execute(query)})
    return found


def _records(conn: Connection, key: str, seqs: list[int]) -> dict[int, list[Redaction]]:
    """The redaction records of ``key``'s events at ``seqs``, in round order, by seq."""
    if not seqs:
        return {}
    found: dict[int, list[Redaction]] = {}
    for record in records_of(conn, key, seqs=seqs):
        found.setdefault(record.seq, []).append(record)
    return found


#: What a record holds besides its ids, texts and leaf digests: five hashes of 64 hex digits,
#: seq, round, two times.
_RECORD_FIXED = 5 * 64 + 40


def _record_bytes(key: str, event_id: str, reason: str, policy: str) -> int:
    """About what the record proving a compaction adds (its leaf digests aside)."""
    texts = (key, event_id, reason, policy)
    return _RECORD_FIXED + sum(len(text.encode("utf-8")) for text in texts)


def conversation_ids(conn: Connection, after: str | None, limit: int) -> list[str]:
    """The next ``limit`` conversation ids after ``after``, in id order (a sweep's pages)."""
    query = select(conversations.c.id).order_by(conversations.c.id).limit(limit)
    if after is not None:
        query = query.where(conversations.c.id > after)
    return list(conn.scalars(query))
