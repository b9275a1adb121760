"""Checkpoints: the chain heads of every conversation, kept outside the database.

The hash chain proves that a log is consistent with itself, not that it is the log that was
written: whoever may write the events table (its owner, a superuser) can edit an event and
recompute every later hash, delete the last events, or delete or rename a whole conversation,
and the chain still verifies. A checkpoint records, for every conversation, the seq, hash and
recorded time of its last event, plus one digest over all of them. Kept where the database's
owner cannot rewrite it (another host, a ticket, a signed mail, a transparency log: the digest
alone is enough to recognise a checkpoint), it turns every such rewrite of the history that
existed when it was taken into a difference ``verify(against=...)`` names: the event at a
checkpointed seq must still carry the checkpointed hash, and each hash covers every event
before it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, func, select

from viewstore.domain.errors import CheckpointError
from viewstore.store.database.schema import events
from viewstore.store.lifecycle import erasure
from viewstore.store.read.reads import aware
from viewstore.store.records import ConversationReport

FORMAT = "viewstore-checkpoint/1"
_HASH = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Head:
    """A conversation's last event when the checkpoint was taken."""

    seq: int
    hash: str
    recorded_at: str  # ISO 8601 in UTC, as ``stamp`` writes it


@dataclass(frozen=True)
class Checkpoint:
    taken_at: str
    heads: dict[str, Head]
    digest: str


def stamp(value: datetime) -> str:
    return aware(value).astimezone(UTC).isoformat()


def _body(taken_at: str, heads: dict[str, Head]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "taken_at": taken_at,
        "conversations": {
            key: {"seq": head.seq, "hash": head.hash, "recorded_at": head.recorded_at}
            for key, head in sorted(heads.items())
        },
    }


def digest_of(taken_at: str, heads: dict[str, Head]) -> str:
    text = json.dumps(_body(taken_at, heads), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def take(conn: Connection) -> dict[str, Any]:
    """The checkpoint of the database as ``conn`` sees it, as a JSON-serialisable dict."""
    last = (
        select(events.c.conversation_id, func.max(events.c.seq).label("seq"))
        .group_by(events.c.conversation_id)
        .subquery()
    )
    query = select(events.c.conversation_id, events.c.seq, events.c.hash, events.c.recorded_at)
    query = query.join(
        last, and_(events.c.conversation_id == last.c.conversation_id, events.c.seq == last.c.seq)
    )
    heads = {
        row.conversation_id: Head(row.seq, row.hash, stamp(row.recorded_at))
        for row in conn.execute(query)
    }
    taken_at = datetime.now(UTC).isoformat()
    return {**_body(taken_at, heads), "digest": digest_of(taken_at, heads)}


def parse(value: Any) -> Checkpoint:
    """A checkpoint from ``take``'s dict (or its JSON text); ``CheckpointError`` when it is
    not one, or when its digest does not match what it holds (it was altered or cut)."""
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise CheckpointError(f"a checkpoint must be JSON: {error}") from error
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise CheckpointError(f"not a viewstore checkpoint (expected format {FORMAT!r})")
    taken_at, digest, conversations = (
        value.get(name) for name in ("taken_at", "digest", "conversations")
    )
    if not isinstance(taken_at, str) or not isinstance(digest, str):
        raise CheckpointError("a checkpoint needs the strings 'taken_at' and 'digest'")
    if not isinstance(conversations, dict):
        raise CheckpointError("a checkpoint's 'conversations' must be an object")
    heads = {key: _head(key, head) for key, head in conversations.items()}
    if digest_of(taken_at, heads) != digest:
        raise CheckpointError(
            "the checkpoint's digest does not match its contents: it was altered or cut"
        )
    return Checkpoint(taken_at=taken_at, heads=heads, digest=digest)


def _head(key: str, value: Any) -> Head:
    if not isinstance(value, dict) or set(value) != {"seq", "hash", "recorded_at"}:
        raise CheckpointError(
            f"checkpoint entry {key[:80]!r} must hold exactly seq, hash and recorded_at"
        )
    seq, hash_, recorded_at = value["seq"], value["hash"], value["recorded_at"]
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq < 2**63:
        raise CheckpointError(f"checkpoint entry {key[:80]!r}: seq must be a positive integer")
    if not isinstance(hash_, str) or not _HASH.fullmatch(hash_):
        raise CheckpointError(f"checkpoint entry {key[:80]!r}: hash must be 64 hex digits")
    if not isinstance(recorded_at, str):
        raise CheckpointError(f"checkpoint entry {key[:80]!r}: recorded_at must be a string")
    return Head(seq, hash_, recorded_at)


def compare(stored: list[Row[Any]], anchor: Head, checkpoint: Checkpoint) -> list[str]:
    """What differs in a conversation's log from its head at the checkpoint."""
    when = f"the checkpoint of {checkpoint.taken_at}"
    row = stored[anchor.seq - 1] if len(stored) >= anchor.seq else None
    if row is None or row.seq != anchor.seq:
        row = next((r for r in stored if r.seq == anchor.seq), None)
    if row is None:
        return [
            f"seq {anchor.seq} is gone: {when} saw {anchor.seq} events, the log holds "
            f"{len(stored)} (events were deleted)"
        ]
    if row.hash != anchor.hash:
        return [
            f"seq {anchor.seq}: events.hash is {row.hash[:16]}..., {when} says "
            f"{anchor.hash[:16]}...: the history up to seq {anchor.seq} was rewritten"
        ]
    if stamp(row.recorded_at) != anchor.recorded_at:
        return [
            f"seq {anchor.seq}: events.recorded_at is {stamp(row.recorded_at)}, {when} says "
            f"{anchor.recorded_at}"
        ]
    return []


def missing(conn: Connection, key: str, checkpoint: Checkpoint) -> ConversationReport:
    """The report of a conversation the checkpoint saw and the database no longer holds:
    erased (its tombstone says so, and held at least what the checkpoint saw) is a note,
    anything else a problem."""
    anchor = checkpoint.heads[key]
    erased = erasure.tombstone(conn, key)
    if erased is not None and erased.events >= anchor.seq:
        same_head = erased.events > anchor.seq or erased.last_hash == anchor.hash
        if same_head:
            note = (
                f"erased at {erased.erased_at.isoformat()} ({erased.reason}), with "
                f"{erased.events} events; the checkpoint of {checkpoint.taken_at} saw "
                f"{anchor.seq}"
            )
            return ConversationReport(conversation_id=key, version=0, notes=[note])
    problem = (
        f"the conversation is missing: the checkpoint of {checkpoint.taken_at} saw "
        f"{anchor.seq} events"
    )
    # The chain does not cover the conversation id, so a renamed conversation keeps its hashes.
    query = select(events.c.conversation_id).where(
        events.c.seq == anchor.seq, events.c.hash == anchor.hash
    )
    renamed = [row.conversation_id for row in conn.execute(query)]
    if renamed:
        names = ", ".join(repr(r) for r in renamed)
        problem += f"; the same history up to seq {anchor.seq} is now under {names} (renamed?)"
    return ConversationReport(conversation_id=key, version=0, problems=[problem])
