"""A conversation's fork links (``forked_from``, ``fork_seq``, ``family_id``), checked.

``fork()`` writes the three columns once and the database refuses to change them afterwards
(docs/schema.md). What a guard cannot stop is a row written wrong in the first place: one
INSERTed by hand, or edited by the owner with the triggers off. Marking a conversation as a
fork of a victim makes the owner's ``erase(victim)`` fail with ``ConversationHasForksError``,
so ``verify`` re-derives here everything about a link that the rows determine:

- a conversation that is not a fork has none of the three columns;
- the source exists, and following ``forked_from`` upwards ends (no cycle);
- ``fork_seq`` is one of the source's own seqs: after the source's own fork seq (``fork()``
  forks from the conversation that holds the event itself) and at most its version;
- ``family_id`` is the source's family (its ``family_id``, or its id if it is no fork);
- the fork stores no event of its own at or below ``fork_seq`` (those are its source's).

That the fork's own chain continues from the source's hash at ``fork_seq`` is checked with the
rest of the chain (``audit``), over the log the lineage reads. A fork re-pointed to an
identical twin of its source passes all of it: the chain does not cover conversation ids
(docs/threat-model.md).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from viewstore.store.audit.derived import show
from viewstore.store.database.schema import conversations, events, tombstones
from viewstore.store.read.lineage import MAX_DEPTH

_LINKS = (
    conversations.c.id,
    conversations.c.version,
    *(conversations.c[name] for name in ("forked_from", "fork_seq", "family_id")),
)


def check(conn: Connection, conv: Any) -> tuple[list[str], bool]:
    """The problems of ``conv``'s fork links (``conv``: its ``conversations`` row), and
    whether its lineage can be read at all (False: a source is missing or the links loop)."""
    if conv.forked_from is None:
        return [
            f"conversations.{column} is {show(getattr(conv, column))} but forked_from is NULL "
            "(only a fork has one)"
            for column in ("fork_seq", "family_id")
            if getattr(conv, column) is not None
        ], True
    broken = _walk(conn, conv)
    if broken is not None:
        return [broken], False
    source = conn.execute(select(*_LINKS).where(conversations.c.id == conv.forked_from)).one()
    found = []
    after = int(source.fork_seq or 0)
    if conv.fork_seq is None or not after < conv.fork_seq <= source.version:
        found.append(
            f"conversations.fork_seq is {show(conv.fork_seq)}, not a seq of its source "
            f"{source.id!r}'s own events ({after + 1} to {source.version})"
        )
    family = source.family_id or source.id
    if conv.family_id != family:
        found.append(
            f"conversations.family_id is {show(conv.family_id)}, but its source "
            f"{source.id!r} is of family {family!r}"
        )
    if conv.fork_seq is not None:
        shadowed = conn.execute(
            select(func.count()).where(
                events.c.conversation_id == conv.id, events.c.seq <= conv.fork_seq
            )
        ).scalar_one()
        if shadowed:
            found.append(
                f"events: {shadowed} event(s) stored under this conversation at or below its "
                f"fork_seq {conv.fork_seq}, where a fork holds none (its source's are read)"
            )
    return found, True


def _walk(conn: Connection, conv: Any) -> str | None:
    """Follow ``forked_from`` to the first conversation that is no fork: what stops it, if
    anything."""
    seen = [conv.id]
    parent = conv.forked_from
    while parent is not None:
        if parent in seen or len(seen) > MAX_DEPTH:
            loop = " -> ".join(repr(key) for key in [*seen, parent])
            return f"conversations.forked_from: the fork links loop ({loop})"
        above = conn.execute(
            select(conversations.c.forked_from).where(conversations.c.id == parent)
        ).first()
        if above is None:
            erased = conn.execute(
                select(tombstones.c.erased_at).where(tombstones.c.conversation_id == parent)
            ).first()
            gone = "was erased" if erased is not None else "does not exist"
            whose = "its" if len(seen) == 1 else f"{seen[-1]!r}'s"
            return (
                f"conversations.forked_from: {whose} source {parent!r} {gone}, so its shared "
                "prefix cannot be read"
            )
        seen.append(parent)
        parent = above.forked_from
    return None
