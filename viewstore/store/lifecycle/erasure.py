"""Row-level SQL for erasing a conversation: its tombstone, then every row it had.

Like ``rows``, every function takes an open ``Connection`` and never commits. The tombstone is
written first: the log's guard (docs/schema.md) deletes a conversation's events only when
its tombstone exists, so no other path can remove them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, text, tuple_

from viewstore.domain.errors import (
    ConversationErasedError,
    ConversationHasForksError,
    ConversationNotFoundError,
)
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database.schema import (
    base_states,
    catalogue_sizes,
    condensations,
    conversation_sources,
    conversations,
    events,
    manipulation_indices,
    masks,
    redactions,
    server_conversations,
    tombstones,
    view_entries,
)
from viewstore.store.read.reads import aware, comparable
from viewstore.store.records import Tombstone

# Children before parents: the foreign keys point from each table to the one after it.
_ROWS_OF = (
    (condensations, condensations.c.conversation_id),
    (view_entries, view_entries.c.conversation_id),
    (manipulation_indices, manipulation_indices.c.conversation_id),
    (base_states, base_states.c.conversation_id),
    (conversation_sources, conversation_sources.c.conversation_id),
    (server_conversations, server_conversations.c.conversation_id),
    (redactions, redactions.c.conversation_id),
    (masks, masks.c.conversation_id),
    (events, events.c.conversation_id),
    (catalogue_sizes, catalogue_sizes.c.conversation_id),
    (conversations, conversations.c.id),
)


def tombstone(conn: Connection, conversation_id: str) -> Tombstone | None:
    row = conn.execute(
        select(tombstones).where(tombstones.c.conversation_id == conversation_id)
    ).first()
    return None if row is None else _tombstone(row)


def refuse_if_erased(conn: Connection, conversation_id: str) -> None:
    """Raise ``ConversationErasedError`` if the conversation was erased (an id is never
    reused: a new conversation under it would read as the old one to anyone holding its
    tombstone or an old checkpoint)."""
    found = tombstone(conn, conversation_id)
    if found is not None:
        raise ConversationErasedError(conversation_id, found.erased_at.isoformat())


def erase(
    conn: Connection,
    conversation_id: str,
    reason: str,
    now: datetime,
    inactive_before: datetime | None = None,
) -> Tombstone | None:
    """Delete every row of the conversation and leave its tombstone, in the caller's
    transaction; the conversation row is locked first, as an append locks it. With
    ``inactive_before``, only if its last append was before then (else None)."""
    row = lock_conversation(conn, conversation_id)
    if row is None:
        refuse_if_erased(conn, conversation_id)
        raise ConversationNotFoundError(conversation_id)
    if inactive_before is not None and aware(row.updated_at) >= inactive_before:
        return None
    forks = forks_of(conn, conversation_id)
    if forks:
        raise ConversationHasForksError(conversation_id, forks)
    erased_by = None
    if conn.dialect.name == "postgresql":
        erased_by = conn.execute(text("SELECT current_user")).scalar()
    values = {
        "conversation_id": conversation_id,
        "events": row.version,
        "last_hash": row.last_hash,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "erased_at": now,
        "reason": reason,
        "erased_by": erased_by,
    }
    conn.execute(insert(tombstones).values(values))
    for table, column in _ROWS_OF:
        conn.execute(delete(table).where(column == conversation_id))
    return _tombstone(values)


def forks_of(conn: Connection, conversation_id: str) -> list[str]:
    """The conversations forked directly from ``conversation_id``."""
    query = (
        select(conversations.c.id)
        .where(conversations.c.forked_from == conversation_id)
        .order_by(conversations.c.id)
    )
    return [found.id for found in conn.execute(query)]


#: Candidates read per round of the inactive scan, and so ids in one IN list: few enough that
#: their lookups cost less than a scan of a small partition (prune asks for 100 at a time).
INACTIVE_BATCH = 100


def prefer_indexes(conn: Connection) -> None:
    """For the rest of this read transaction, on PostgreSQL: no sequential scan where an
    index serves. Without statistics (autovacuum off, a table just loaded) the planner priced
    the fork lookup's IN list by default selectivities, thousands of rows, and scanned every
    conversation (22 ms at 100,000, against 0.1 ms from the index). The inactive scan's
    statements each have an index that serves them; with statistics the planner picks them
    itself. ``SET LOCAL`` ends with the transaction (Citus does not pass it on: its shards
    plan with their own statistics)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")


def inactive(conn: Connection, before: datetime, limit: int) -> list[str]:
    """Up to ``limit`` conversations last appended to before ``before``, oldest first; not
    those that still have forks (a fork's shared prefix is read from its source, so the
    forks go first, and the source comes up in a later batch once they are gone).

    Two index reads per round, whatever the store's size or its statistics: the oldest
    candidates, a range of ``ix_conversations_updated_at_id`` (keyset: after the previous
    round's last), then which of them are fork sources, equality lookups of
    ``ix_conversations_forked_from`` (:func:`prefer_indexes`). One statement with the forks as
    a subquery read every fork source, and was planned as a sequential scan of every
    conversation where there were no statistics; a correlated ``NOT EXISTS`` Citus refuses
    across shards. Neither statement names one conversation: on Citus each runs on every
    shard, from its indexes."""
    c = conversations
    prefer_indexes(conn)
    moment = comparable(conn, before)
    found: list[str] = []
    last: tuple[Any, str] | None = None
    batch = min(INACTIVE_BATCH, limit)
    while len(found) < limit:
        query = select(c.c.id, c.c.updated_at).where(c.c.updated_at < moment)
        if last is not None:
            query = query.where(tuple_(c.c.updated_at, c.c.id) > last)
        rows = conn.execute(query.order_by(c.c.updated_at, c.c.id).limit(batch)).all()
        if not rows:
            break
        ids = [row.id for row in rows]
        sources = set(
            conn.execute(select(c.c.forked_from).where(c.c.forked_from.in_(ids)).distinct())
            .scalars()
            .all()
        )
        found.extend(key for key in ids if key not in sources)
        if len(rows) < batch:
            break
        last = (comparable(conn, aware(rows[-1].updated_at)), rows[-1].id)
    return found[:limit]


def _tombstone(row: Any) -> Tombstone:
    values = row if isinstance(row, dict) else row._mapping
    return Tombstone(
        conversation_id=values["conversation_id"],
        events=int(values["events"]),
        last_hash=values["last_hash"],
        created_at=aware(values["created_at"]),
        updated_at=aware(values["updated_at"]),
        erased_at=aware(values["erased_at"]),
        reason=values["reason"],
        erased_by=values["erased_by"],
    )


def ranked_by_source(conn: Connection) -> list[tuple[str, str, int]]:
    """Every conversation an agent server claimed (``conversation_sources``), with its source
    and its rank among that source's conversations, the most recently appended to first (1)."""
    s, c = conversation_sources, conversations
    rank = (
        func.row_number()
        .over(partition_by=s.c.source, order_by=(c.c.updated_at.desc(), c.c.id.desc()))
        .label("rank")
    )
    query = select(s.c.source, c.c.id, rank).join(c, c.c.id == s.c.conversation_id)
    return [(row.source, row.id, int(row.rank)) for row in conn.execute(query)]
