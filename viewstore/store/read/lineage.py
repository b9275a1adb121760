"""Where a conversation's events live: its own rows, and for a fork its sources' prefixes.

A fork's events ``1..fork_seq`` are read from the conversation it was forked from (which may
itself be a fork), so reading a fork's log means reading a few seq ranges, each from one
conversation. Every statement still names a single conversation: on a store sharded by
conversation each range is a single-shard read (docs/distribution.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from viewstore.store.database.schema import conversations, events

#: More ancestors than any real lineage has; a longer walk means a cycle in corrupted rows.
MAX_DEPTH = 10_000


@dataclass(frozen=True)
class Segment:
    """The seqs ``after + 1 .. upto`` (``upto`` None: to the end) of a lineage, stored under
    ``conversation_id``."""

    conversation_id: str
    after: int
    upto: int | None

    def clamp(self, after: int, upto: int | None) -> tuple[int, int | None] | None:
        """The part of ``after + 1 .. upto`` in this segment, or None if they do not meet."""
        low = max(after, self.after)
        ends = [end for end in (upto, self.upto) if end is not None]
        high = min(ends) if ends else None
        return None if high is not None and high <= low else (low, high)


def is_fork(row: Any) -> bool:
    return row.forked_from is not None


def segments(conn: Connection, row: Any) -> list[Segment]:
    """The lineage of the conversation ``row`` (its ``conversations`` row), oldest first."""
    found = [Segment(row.id, int(row.fork_seq or 0), None)]
    parent, upto = row.forked_from, row.fork_seq
    while parent is not None:
        if len(found) > MAX_DEPTH:
            raise RuntimeError(f"the fork lineage of {row.id!r} does not end")
        query = select(conversations.c.fork_seq, conversations.c.forked_from).where(
            conversations.c.id == parent
        )
        above = conn.execute(query).first()
        if above is None:  # the store refuses to erase a source, so this is damage
            raise RuntimeError(f"{row.id!r} was forked from {parent!r}, which is missing")
        found.append(Segment(parent, int(above.fork_seq or 0), int(upto)))
        parent, upto = above.forked_from, above.fork_seq
    found.reverse()
    return found


def holder(parts: Sequence[Segment], seq: int) -> str | None:
    """The conversation whose log holds event ``seq`` of the lineage ``parts`` (oldest first),
    or None when it is the last part's own (or ``parts`` is empty)."""
    for segment in parts[:-1]:
        if segment.after < seq <= (segment.upto or 0):
            return segment.conversation_id
    return None


def owner(conn: Connection, row: Any, seq: int) -> str:
    """The conversation whose view rows hold the view right after ``seq``: a fork's rows
    hold its view from its fork seq on (the rows alive there were copied when it forked);
    before that, its source's rows do."""
    if not is_fork(row) or seq >= row.fork_seq:
        return str(row.id)
    for segment in reversed(segments(conn, row)):
        if seq >= segment.after:
            return segment.conversation_id
    raise AssertionError("the first segment starts at 0")


def holds_any(conn: Connection, parts: Sequence[Segment], event_ids: Sequence[str]) -> bool:
    """Whether any of ``event_ids`` is an event of these segments."""
    for segment in parts:
        query = select(events.c.seq).where(
            events.c.conversation_id == segment.conversation_id,
            events.c.event_id.in_(event_ids),
            events.c.seq > segment.after,
        )
        if segment.upto is not None:
            query = query.where(events.c.seq <= segment.upto)
        if conn.execute(query.limit(1)).first() is not None:
            return True
    return False
