"""Redaction: remove the content of one event and keep everything the view logic reads.

The new payload keeps the event's *envelope* (``ENVELOPE``: kind, id, source, timestamp,
parent id, tool-call and LLM-response ids, forgotten ids, summary offset; and every nested
``kind``, which names a type to whoever parses the event) and replaces every other string, or
only the strings under the JSON Pointers given, by ``MARK``. The event then parses to the same
envelope, so views, indices and the request flag are unchanged; a change that would alter one
is refused.

The hash chain covers each event's exact payload (``viewstore.domain.chain``), so a redacted
event no longer matches its own link. The link is carried by its record instead: before anything is
changed the link is checked (the chain hash of the previous event, this seq, this id and the
payload being removed must give the stored hash), and the record keeps the previous hash, the
event's hash, the SHA-256 digests of the payload before and after, and the leaf digests of
the strings it replaced (``leaves``). ``verify`` then checks the redacted payload against the
hash committed at append (chain scheme 2: it may differ only at the recorded strings, only by
the marker), goes on from the record's event hash, and finds any other change: a payload
rewritten, a record whose own hash (keyed like the chain) does not match, a hash changed
anywhere. Checkpoints taken before a redaction still verify (the hashes do not change).
docs/lifecycle.md says what is done for events hashed before scheme 2.

Like ``rows``, every function takes an open ``Connection`` and never commits.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    func,
    insert,
    select,
    text,
    update,
)

from viewstore.domain import leaves
from viewstore.domain.chain import GENESIS, chain_hash, chain_hash2, event_hash
from viewstore.domain.errors import (
    ChainMismatchError,
    ConversationNotFoundError,
    InvalidArgumentError,
)
from viewstore.domain.events import Event, Role, canonical_json, parse_event, summary_event
from viewstore.domain.scrub import COMPACTED, MARK, digest, redacted_payload
from viewstore.store.append import rows
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database.schema import (
    condensations,
    conversations,
    events,
    redactions,
    view_entries,
)
from viewstore.store.lifecycle import erasure
from viewstore.store.read import lineage, reads
from viewstore.store.records import REDACTED_BY_POLICY, Redaction

# -- the operation --------------------------------------------------------------------------


@dataclass(frozen=True)
class Located:
    owner: str  # the conversation whose log row holds the event (a fork's source, perhaps)
    seq: int
    payload: str
    hash: str


def _locate(conn: Connection, named: Any, event_id: str) -> tuple[str, int]:
    """The conversation whose log row holds ``event_id`` of ``named``'s lineage, and its seq
    (neither can change: a lineage's links and a log's seqs are fixed)."""
    for segment in reversed(lineage.segments(conn, named)):
        query = select(events.c.seq).where(
            events.c.conversation_id == segment.conversation_id,
            events.c.event_id == event_id,
            events.c.seq > segment.after,
        )
        if segment.upto is not None:
            query = query.where(events.c.seq <= segment.upto)
        found = conn.execute(query).first()
        if found is not None:
            return segment.conversation_id, int(found.seq)
    raise InvalidArgumentError(f"conversation {named.id!r} has no event {event_id!r}")


def read_located(conn: Connection, owner: str, seq: int) -> Located:
    query = select(events.c.payload, events.c.hash).where(
        events.c.conversation_id == owner, events.c.seq == seq
    )
    found = conn.execute(query).one()
    return Located(owner, seq, found.payload, found.hash)


def redact(
    conn: Connection,
    key: str,
    event_id: str,
    *,
    reason: str,
    paths: Sequence[str] | None,
    now: datetime,
    chain_key: bytes | None,
) -> Redaction:
    """Redact the event in the caller's transaction.

    Locks are taken ancestors first: the conversation whose log holds the event, then every
    conversation sharing it (``lock_holders``), as a fork locks the conversation it copies
    from. So no fork can copy the event's rows while they are being redacted, and a fork
    that committed first is found and redacted too. The event is read only once it is
    locked: a redaction of it that committed meanwhile is then seen."""
    named = reads.lineage_row_or_none(conn, key)
    if named is None:
        erasure.refuse_if_erased(conn, key)
        raise ConversationNotFoundError(key)
    owner, seq = _locate(conn, named, event_id)
    holders = lock_holders(conn, owner, seq)
    if not holders:  # the owner was erased after it was read (it had no forks then)
        erasure.refuse_if_erased(conn, key)
        raise ConversationNotFoundError(key)
    removal = plan(conn, read_located(conn, owner, seq), event_id, paths, chain_key=chain_key)
    if removal is None:
        raise InvalidArgumentError(f"event {event_id!r}: nothing left to redact there")
    return apply(conn, removal, holders, reason=reason, policy=None, now=now, chain_key=chain_key)


@dataclass(frozen=True)
class Removal:
    """A redaction or compaction worked out but not written: the new payload, and the
    record's columns but who, when, why and its own hash."""

    at: Located
    payload: str
    values: dict[str, Any]

    @property
    def freed(self) -> int:
        """The bytes the log's payload loses, less what the record's leaf digests add."""
        digests = self.values["leaf_digests"]
        return (
            len(self.at.payload.encode("utf-8"))
            - len(self.payload.encode("utf-8"))
            - (0 if digests is None else len(digests))
        )


def plan(
    conn: Connection,
    at: Located,
    event_id: str,
    paths: Sequence[str] | None,
    *,
    chain_key: bytes | None,
    mark: str = MARK,
    earlier: list[Redaction] | None = None,
    previous: str | None = None,
) -> Removal | None:
    """What removing the content of the locked event ``at`` (or the strings under ``paths``)
    would write, after checking its link in the chain; None when nothing is left to
    remove. ``earlier`` (its records) and ``previous`` (the chain hash before it) may be
    given by a caller that read them for many events at once."""
    if earlier is None:
        earlier = records_of(conn, at.owner, at.seq)
    if previous is None:
        previous = _previous_hash(conn, at.owner, at.seq)
    checkable = _check_link(at, event_id, previous, earlier, chain_key)
    payload = redacted_payload(at.payload, paths, mark=mark)
    if payload == at.payload:
        return None
    values: dict[str, Any] = {
        "conversation_id": at.owner,
        "seq": at.seq,
        "round": len(earlier) + 1,
        "event_id": event_id,
        "paths": None if paths is None else json.dumps(list(paths)),
        "previous_hash": previous,
        "event_hash": at.hash,
        "removed_digest": digest(at.payload),
        "redacted_digest": digest(payload),
        "leaf_digests": (
            leaves.encode(leaves.replaced(at.payload, payload, chain_key)) if checkable else None
        ),
    }
    return Removal(at, payload, values)


def record_values(
    removal: Removal,
    *,
    reason: str,
    policy: str | None,
    now: datetime,
    by: str | None,
    chain_key: bytes | None,
) -> dict[str, Any]:
    """Every column of ``removal``'s record, its own hash included."""
    values = dict(removal.values)
    values.update(reason=reason, redacted_at=now, redacted_by=by, policy=policy)
    values["record_hash"] = record_hash(values, chain_key)
    return values


def database_user(conn: Connection) -> str | None:
    """Who a record says wrote it: the database user on PostgreSQL, nobody on SQLite."""
    return conn.execute(text("SELECT current_user")).scalar() if _is_pg(conn) else None


def write_removals(
    conn: Connection, records: Sequence[dict[str, Any]], payloads: Sequence[str]
) -> None:
    """The records first (the log's guard looks for them), then the payloads they name."""
    if not records:
        return
    conn.execute(insert(redactions), list(records))
    conn.execute(
        update(events)
        .where(events.c.conversation_id == bindparam("owner"), events.c.seq == bindparam("at"))
        .values(payload=bindparam("removed")),
        [
            {"owner": values["conversation_id"], "at": values["seq"], "removed": payload}
            for values, payload in zip(records, payloads, strict=True)
        ],
    )


def apply(
    conn: Connection,
    removal: Removal,
    holders: Sequence[str],
    *,
    reason: str,
    policy: str | None,
    now: datetime,
    chain_key: bytes | None,
) -> Redaction:
    """Write ``removal`` (its record, then the payload), then every copy of it the holders'
    rows keep."""
    values = record_values(
        removal,
        reason=reason,
        policy=policy,
        now=now,
        by=database_user(conn),
        chain_key=chain_key,
    )
    write_removals(conn, [values], [removal.payload])
    _redact_copies(conn, removal.at, parse_event(removal.payload), holders)
    return to_record(values)


def _is_pg(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _previous_hash(conn: Connection, owner: str, seq: int) -> str:
    if seq == 1:
        return GENESIS
    (before,) = reads.read_events(conn, owner, after=seq - 2, upto=seq - 1)
    return before.hash


def _check_link(
    at: Located,
    event_id: str,
    previous: str,
    earlier: list[Redaction],
    chain_key: bytes | None,
) -> bool:
    """Refuse to redact an event whose link in the chain does not hold now: the record would
    vouch for a link nobody can check any more. True when the event was hashed under chain
    scheme 2, so its record keeps the leaf digests that make the redaction checkable."""
    if earlier:
        last = earlier[-1]
        if last.redacted_digest != digest(at.payload) or last.event_hash != at.hash:
            raise ChainMismatchError(
                at.owner, at.seq, event_id, "its payload or hash changed since its last redaction"
            )
        if earlier[0].leaf_digests is None:
            _refuse_uncheckable(at, event_id, chain_key)
            return False
        row = SimpleNamespace(seq=at.seq, event_id=event_id, payload=at.payload, hash=at.hash)
        problems, _ = check_redacted(row, previous, earlier, chain_key)
        if problems:
            raise ChainMismatchError(at.owner, at.seq, event_id, problems[0])
        return True
    if event_hash(previous, at.seq, event_id, at.payload, chain_key) == at.hash:
        return True
    if chain_hash(previous, at.seq, event_id, at.payload, chain_key) == at.hash:
        _refuse_uncheckable(at, event_id, chain_key)
        return False
    raise ChainMismatchError(
        at.owner,
        at.seq,
        event_id,
        "its hash does not follow from its payload and the previous hash (or this store's "
        "chain key is not the one it was written with)",
    )


def _refuse_uncheckable(at: Located, event_id: str, chain_key: bytes | None) -> None:
    """An event hashed before chain scheme 2 (its hash covers its text only) cannot have its
    redaction checked against that hash. On a keyed store the record's keyed hash still
    vouches for it; without a key anyone could write that record, so nothing would tell the
    redaction from a rewrite: refused (docs/lifecycle.md, "Events hashed before scheme 2")."""
    if chain_key is None:
        raise InvalidArgumentError(
            f"event {event_id!r} (seq {at.seq}) of conversation {at.owner!r} was hashed before "
            "chain scheme 2, and this store has no chain key: its redaction could not be told "
            "from a forged one (erase the conversation instead)"
        )


def _redact_copies(conn: Connection, at: Located, event: Event, holders: Sequence[str]) -> None:
    """Every copy the store keeps: for a condensation, its summary in its own table and in
    the summary rows of the conversation and of every fork that shares the event
    (``holders``). An event's view rows hold no copy of its payload; one
    a store still migrating carries is dropped, so a read takes the redacted log's."""
    for holder in holders:
        conn.execute(
            update(view_entries)
            .where(
                view_entries.c.conversation_id == holder,
                view_entries.c.seq == at.seq,
                view_entries.c.is_summary.is_(False),
                view_entries.c.payload.is_not(None),
            )
            .values(payload=None, source=None, timestamp=None, parent_id=None)
        )
    if event.role is not Role.CONDENSATION:
        return
    conn.execute(
        update(condensations)
        .where(condensations.c.conversation_id == at.owner, condensations.c.seq == at.seq)
        .values(summary=rows.without_nul(event.summary))
    )
    if event.inserts_summary:
        summary = summary_event(event)
        for holder in holders:
            conn.execute(
                update(view_entries)
                .where(
                    view_entries.c.conversation_id == holder,
                    view_entries.c.seq == at.seq,
                    view_entries.c.is_summary.is_(True),
                )
                .values(payload=summary.payload_json)
            )


def lock_holders(conn: Connection, owner: str, seq: int) -> list[str]:
    """Lock ``owner`` and every conversation sharing its seq ``seq`` (its forks at or after
    it, and all their forks), and return them; empty if ``owner`` is gone.

    Level by level, each level in id order, and each level's forks looked up only once their
    source is locked: a fork of a locked conversation cannot commit until the lock is
    released, so none is missed. Every transaction that locks several conversations of a
    family takes them in this order (depth, then id), so they cannot deadlock. One statement
    per conversation, not one per level: every statement names a single conversation, so that
    it stays a single-shard statement on a store sharded by conversation
    (docs/distribution.md; tests/store/test_distribution_key.py)."""
    if lock_conversation(conn, owner) is None:
        return []
    found = [owner]
    query = select(conversations.c.id).where(
        conversations.c.forked_from == owner, conversations.c.fork_seq >= seq
    )
    frontier = sorted(row.id for row in conn.execute(query))
    while frontier:
        # A fork erased while this waited for its lock is simply not a holder any more.
        locked = [child for child in frontier if lock_conversation(conn, child) is not None]
        found.extend(locked)
        frontier = sorted(child for parent in locked for child in erasure.forks_of(conn, parent))
    return found


# -- the records ----------------------------------------------------------------------------


def _when(value: datetime) -> str:
    return reads.aware(value).astimezone(UTC).isoformat()


def record_hash(values: dict[str, Any], chain_key: bytes | None) -> str:
    """The record's own hash: the chain's function (keyed when the store has a chain key)
    over the event's hash and every other field of the record."""
    fields = [
        values["conversation_id"],
        values["round"],
        values["paths"],
        values["reason"],
        _when(values["redacted_at"]),
        values["redacted_by"],
        values["previous_hash"],
        values["removed_digest"],
        values["redacted_digest"],
    ]
    # Records written before revision 0016 have no leaf digests and keep the hash they had;
    # a record that has them is hashed over one more field, so stripping them breaks it.
    if values.get("leaf_digests") is not None:
        fields.append(values["leaf_digests"])
    # A compaction's record names its policy, tagged so it can never read as leaf digests.
    if values.get("policy") is not None:
        fields.append({"policy": values["policy"]})
    return chain_hash(
        values["event_hash"], values["seq"], values["event_id"], canonical_json(fields), chain_key
    )


def compaction_records() -> ColumnElement[bool]:
    """Which ``redactions`` rows compaction wrote, as ``Redaction.compacted`` tells them:
    a policy named, not a ``redact_after`` one. Compared by ``substr``, not ``LIKE``, which
    SQLite matches without regard to case."""
    policy = redactions.c.policy
    prefix = REDACTED_BY_POLICY
    return and_(policy.is_not(None), func.substr(policy, 1, len(prefix)) != prefix)


def to_record(values: Any) -> Redaction:
    mapping: dict[str, Any] = dict(values if isinstance(values, dict) else values._mapping)

    def get(name: str) -> Any:
        return mapping[name]

    paths = get("paths")
    return Redaction(
        conversation_id=get("conversation_id"),
        seq=int(get("seq")),
        round=int(get("round")),
        event_id=get("event_id"),
        paths=None if paths is None else tuple(json.loads(paths)),
        reason=get("reason"),
        redacted_at=reads.aware(get("redacted_at")),
        redacted_by=get("redacted_by"),
        previous_hash=get("previous_hash"),
        event_hash=get("event_hash"),
        removed_digest=get("removed_digest"),
        redacted_digest=get("redacted_digest"),
        record_hash=get("record_hash"),
        leaf_digests=get("leaf_digests"),
        policy=mapping.get("policy"),
    )


def records_of(
    conn: Connection, owner: str, seq: int | None = None, *, seqs: Sequence[int] = ()
) -> list[Redaction]:
    """The redaction records of ``owner``'s own events (of seq ``seq`` only, or of ``seqs``,
    if given), in seq and round order."""
    query = select(redactions).where(redactions.c.conversation_id == owner)
    if seq is not None:
        query = query.where(redactions.c.seq == seq)
    if seqs:
        query = query.where(redactions.c.seq.in_(list(seqs)))
    ordered = query.order_by(redactions.c.seq, redactions.c.round)
    return [to_record(row) for row in conn.execute(ordered)]


def lineage_records(conn: Connection, row: Any) -> dict[int, list[Redaction]]:
    """Every redaction record of the events of the conversation of ``row``, its shared
    prefix included, by seq."""
    found: dict[int, list[Redaction]] = {}
    for segment in lineage.segments(conn, row):
        for record in records_of(conn, segment.conversation_id):
            inside = record.seq > segment.after and (
                segment.upto is None or record.seq <= segment.upto
            )
            if inside:
                found.setdefault(record.seq, []).append(record)
    return found


def check_redacted(
    row: Any, previous: str, records: list[Redaction], chain_key: bytes | None
) -> tuple[list[str], str]:
    """``verify``'s link check for a redacted log row: the problems found (empty: the link
    holds, and the payload is the one the last redaction left), and a note for the report."""
    where = f"seq {row.seq} (event {row.event_id!r})"
    problems = [
        f"{where}: redaction record {record.round} does not match its own hash (the record "
        "was altered, or written without the chain key)"
        for record in records
        if record_hash(_values(record), chain_key) != record.record_hash
    ]
    first = records[0]
    if first.previous_hash != previous or any(r.event_hash != row.hash for r in records):
        problems.append(
            f"hash chain broken at {where}: the event or one before it was altered, "
            "reordered or removed (it was redacted; its record holds the hashes it had)"
        )
    for before, after in itertools.pairwise(records):
        if after.removed_digest != before.redacted_digest:
            problems.append(
                f"{where}: redaction {after.round} did not start where {before.round} ended"
            )
    if digest(row.payload) != records[-1].redacted_digest:
        problems.append(
            f"{where}: its payload is not the one its last redaction left: altered afterwards"
        )
    checked, unchecked = _check_content(row, previous, records, chain_key)
    problems.extend(checked)
    last = records[-1]
    what = "all content" if last.paths is None else ", ".join(last.paths)
    if last.policy is None:
        done = "redacted"
    else:
        done = f"{'compacted' if last.compacted else 'redacted'} by retention ({last.policy})"
    note = (
        f"{where} {done} ({len(records)} time(s); last at {last.redacted_at.isoformat()}"
        f"{'' if last.redacted_by is None else ' by ' + last.redacted_by}, {what}): "
        f"{last.reason}{unchecked}"
    )
    return problems, note


def _check_content(
    row: Any, previous: str, records: list[Redaction], chain_key: bytes | None
) -> tuple[list[str], str]:
    """That the redacted payload differs from what was hashed at append only at the strings
    its records name, and only by the marker (``leaves``): the problems, and what the note
    must add when that cannot be checked.

    An event hashed before chain scheme 2 cannot be checked so: its records carry no leaf
    digests. On a keyed store the records' keyed hashes still vouch for them (only a key
    holder writes one), and the note says the content was not checked. Without a key anyone
    can write such a record, for any event: it is a problem, whatever the event's scheme,
    so a forged record without leaf digests (or one stripped of them) is never taken on
    trust. A mix of rounds with and without them is never written by ``redact``."""
    where = f"seq {row.seq} (event {row.event_id!r})"
    carried = [record.leaf_digests is not None for record in records]
    if not any(carried):
        if chain_key is not None:
            return [], " [hashed before chain scheme 2: vouched for by its keyed record only]"
        return [
            f"{where}: its redaction cannot be checked: no record carries the leaf digests "
            "of the strings it replaced (hashed before chain scheme 2, or stripped), and in a "
            "store without a chain key anyone could have written it: the payload may have "
            "been rewritten, not only redacted"
        ], ""
    if not all(carried):
        return [f"{where}: some of its redaction records carry no leaf digests: stripped"], ""
    problems: list[str] = []
    union: dict[str, str] = {}
    marks: dict[str, str] = {}
    for record in records:
        assert record.leaf_digests is not None
        try:
            digests = leaves.decode(record.leaf_digests)
        except ValueError as error:
            return [f"{where}: redaction {record.round}'s leaf digests: {error}"], ""
        for pointer, leaf in digests.items():
            if union.setdefault(pointer, leaf) != leaf:
                problems.append(f"{where}: two redactions record {pointer} differently")
            marks.setdefault(pointer, COMPACTED if record.compacted else MARK)
            if not _under(pointer, record.paths):
                problems.append(
                    f"{where}: redaction {record.round} replaced {pointer}, outside its paths"
                )
    try:
        root = leaves.redacted_root(row.payload, union, marks, chain_key)
    except (ValueError, TypeError, RecursionError) as error:
        problems.append(f"{where}: rewritten, not only redacted: {error}")
        return problems, ""
    # The first record's removed digest is the original text's: the hash binds it too.
    original = chain_hash2(
        previous, row.seq, row.event_id, records[0].removed_digest, root, key=chain_key
    )
    if original != row.hash:
        problems.append(
            f"{where}: rewritten, not only redacted: its payload differs from what was hashed "
            "at append elsewhere than at the paths its redactions record, or the digest of "
            "its original payload is not the one its first record holds"
        )
    return problems, ""


def _under(pointer: str, paths: tuple[str, ...] | None) -> bool:
    """Whether ``pointer`` is at or below one of ``paths`` (None: the whole payload); an
    array index may be written with leading zeros, as ``scrub`` reads it."""
    if paths is None:
        return True
    tokens = pointer.split("/")

    def same(a: str, b: str) -> bool:
        return a == b or (a.isdigit() and b.isdigit() and int(a) == int(b))

    for path in paths:
        prefix = path.split("/")
        if len(prefix) <= len(tokens) and all(map(same, prefix, tokens)):
            return True
    return False


def _values(record: Redaction) -> dict[str, Any]:
    return {
        "conversation_id": record.conversation_id,
        "seq": record.seq,
        "round": record.round,
        "event_id": record.event_id,
        "paths": None if record.paths is None else json.dumps(list(record.paths)),
        "reason": record.reason,
        "redacted_at": record.redacted_at,
        "redacted_by": record.redacted_by,
        "previous_hash": record.previous_hash,
        "event_hash": record.event_hash,
        "removed_digest": record.removed_digest,
        "redacted_digest": record.redacted_digest,
        "leaf_digests": record.leaf_digests,
        "policy": record.policy,
    }
