"""Row-level SQL for forking a conversation: a new one that shares its source's prefix.

The fork's events ``1..fork_seq`` stay where they are (``lineage`` reads them from the
source). What is written under the fork's id is only what its own appends will build on: the
view rows and index rows alive right after ``fork_seq``, copied server-side by one
``INSERT ... SELECT`` each, and its conversation row, whose carried state is what the
projector had right after ``fork_seq`` (recomputed from those view rows: the index tracker's
state is a function of the view alone, ``viewstore.domain.view.incremental``). So a fork costs
O(view) rows whatever the prefix's length, and its own chain continues from the source's hash
at ``fork_seq``.

Like ``rows``, every function takes an open ``Connection`` and never commits.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, literal, null, select

from viewstore.domain.errors import (
    CompactedHistoryError,
    ConversationExistsError,
    ConversationNotFoundError,
    InvalidArgumentError,
)
from viewstore.domain.projector import Projection, ProjectionState
from viewstore.domain.view import IndexTracker
from viewstore.store.append import rows
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database.schema import (
    conversations,
    events,
    manipulation_indices,
    redactions,
    view_entries,
)
from viewstore.store.lifecycle import erasure
from viewstore.store.lifecycle.redaction import compaction_records
from viewstore.store.read import lineage, reads, sizes


def fork(conn: Connection, source: str, at_seq: int, new_id: str, now: datetime) -> None:
    """Create ``new_id`` as a fork of ``source`` right after its event ``at_seq``.

    What is copied are the rows of the conversation that holds event ``at_seq`` itself (the
    source, or for a seq inside the source's shared prefix one of its ancestors): that one,
    the *owner*, is the conversation locked, as an append to it locks it. So an append to the
    owner cannot move its rows between the read of its version and the copy, and a
    redaction, which locks the owner of the event and then every conversation sharing it
    (``redaction.lock_holders``), either finds this fork once it has committed or is
    waited for and leaves its rows redacted before they are copied. Locking ``source``
    instead, when it is not the owner, left both races open (issue 26). Ancestors are
    locked before descendants everywhere, so these locks cannot deadlock with a redaction's.
    """
    named = _row(conn, source)
    if named is None:
        erasure.refuse_if_erased(conn, source)
        raise ConversationNotFoundError(source)
    # A version only grows, so a seq valid now stays valid; the lineage links never change.
    if not 1 <= at_seq <= named.version:
        raise InvalidArgumentError(
            f"at_seq must be a seq of {source!r}, from 1 to {named.version}, got {at_seq}"
        )
    if reads.lineage_row_or_none(conn, new_id) is not None:
        raise ConversationExistsError(new_id)
    erasure.refuse_if_erased(conn, new_id)
    # Fork from the conversation that holds event ``at_seq`` itself, so a lineage never has
    # an empty segment and a fork of a fork reads no more sources than it must.
    owner_id = source
    while named.forked_from is not None and at_seq <= named.fork_seq:
        owner_id = named.forked_from
        named = _row(conn, owner_id)
        if named is None:  # a source with forks is never erased: this is damage
            raise ConversationNotFoundError(owner_id)
    row = lock_conversation(conn, owner_id)
    if row is None:  # erased since it was read: the owner had no forks then
        erasure.refuse_if_erased(conn, source)
        raise ConversationNotFoundError(source)
    family = row.family_id or row.id
    owner = row.id
    latest = at_seq == row.version
    # Where the fork is the source's present, its row's carried state is the fork's; else the
    # row is written first (the copies refer to it) and its state set from the copied view.
    state, last_hash = (
        (rows.state_from_row(row), row.last_hash) if latest else _provisional(conn, row, at_seq)
    )
    values = rows.state_values(state, last_hash)
    values.update(
        id=new_id,
        created_at=now,
        updated_at=now,
        forked_from=owner,
        fork_seq=at_seq,
        family_id=family,
    )
    conn.execute(insert(conversations).values(values))
    for table, lifetime in (
        (view_entries, ("entered_seq", "left_seq")),
        (manipulation_indices, ("from_seq", "to_seq")),
    ):
        _copy_alive(
            conn,
            table,
            lifetime=lifetime,
            source=owner,
            new_id=new_id,
            at_seq=None if latest else at_seq,
        )
    _refuse_compacted(conn, row, new_id, source, at_seq)
    if not latest:
        # The copies are the fork's open rows: reading them back is O(view) by the partial
        # index, where the source's rows alive at ``at_seq`` take a scan of its history.
        tracker, _ = IndexTracker.scan(rows.load_current_view(conn, new_id))
        state = replace(state, tracker=tracker.state())
        rows.save_state(conn, new_id, state, last_hash, now)
    sizes.created(conn, new_id, state.version, state.tracker.length)


def _refuse_compacted(conn: Connection, owner: Any, new_id: str, source: str, at_seq: int) -> None:
    """``CompactedHistoryError`` if the fork's view holds an event whose content retention
    compacted (its copied rows all name their log in ``holder``). One a policy's
    ``redact_after`` redacted is not refused, as after ``store.redact``: the fork's LLM is
    sent ``[redacted]``, as the source's own is. Compaction takes only events
    no live view holds, so this is a fork into the past; one racing a compaction is either
    seen by it (a fork's open rows keep their events) or sees its records, the owner's lock
    ordering the two. One statement per conversation named, as everywhere (a store sharded
    by conversation: docs/distribution.md). A lineage with nothing compacted, nearly every
    one, costs a read of its redaction records (a key lookup when it has none) per
    conversation in it, and no read of the view."""
    compacted = [
        segment.conversation_id
        for segment in lineage.segments(conn, owner)
        if conn.execute(
            select(redactions.c.seq)
            .where(
                redactions.c.conversation_id == segment.conversation_id,
                compaction_records(),
            )
            .limit(1)
        ).first()
        is not None
    ]
    if not compacted:
        return
    query = select(view_entries.c.holder, view_entries.c.seq).where(
        view_entries.c.conversation_id == new_id, view_entries.c.is_summary.is_(False)
    )
    by_log: dict[str, list[int]] = {}
    for row in conn.execute(query):
        by_log.setdefault(row.holder, []).append(int(row.seq))
    for holder, seqs in sorted(by_log.items()):
        if holder not in compacted:
            continue
        found = conn.execute(
            select(redactions.c.seq, redactions.c.event_id)
            .where(
                redactions.c.conversation_id == holder,
                redactions.c.seq.in_(seqs),
                compaction_records(),
            )
            .order_by(redactions.c.seq)
            .limit(1)
        ).first()
        if found is not None:
            raise CompactedHistoryError(source, at_seq, found.event_id, int(found.seq))


def _row(conn: Connection, conversation_id: str) -> Any:
    return conn.execute(select(conversations).where(conversations.c.id == conversation_id)).first()


def _provisional(conn: Connection, row: Any, at_seq: int) -> tuple[ProjectionState, str]:
    """The state right after ``at_seq`` of the conversation of ``row`` but for its tracker
    (set once the view is copied), and the chain hash there."""
    last_hash = conn.execute(
        select(events.c.hash).where(events.c.conversation_id == row.id, events.c.seq == at_seq)
    ).scalar_one()
    state = ProjectionState(
        version=at_seq, unhandled_request=reads.unhandled_as_of(conn, row, at_seq)
    )
    return state, last_hash


def _copy_alive(
    conn: Connection,
    table: Any,
    *,
    lifetime: tuple[str, str],
    source: str,
    new_id: str,
    at_seq: int | None,
) -> None:
    """Copy ``source``'s rows of ``table`` alive right after ``at_seq`` (None: now, read by
    the partial index of open rows) to ``new_id``, still open (whatever closed them later
    happened in the source only). A copied view row names the log holding its event: the
    source's row's holder, or the source (none of these events is the fork's own)."""
    start, end = lifetime
    columns = [column.name for column in table.columns]
    chosen = [
        literal(new_id).label(name)
        if name == "conversation_id"
        else null().label(name)
        if name == end
        else func.coalesce(table.c.holder, table.c.conversation_id).label(name)
        if name == "holder"
        else table.c[name]
        for name in columns
    ]
    alive = (
        table.c[end].is_(None)
        if at_seq is None
        else rows.alive_at(table.c[start], table.c[end], at_seq)
    )
    query = select(*chosen).where(table.c.conversation_id == source, alive)
    conn.execute(insert(table).from_select(columns, query))


def own_part(replayed: Projection, fork_seq: int) -> Projection:
    """Of the rows a replay of a fork's whole log gives, those the fork itself keeps: the ones
    still alive right after ``fork_seq`` and all later ones (a conversation that is not a
    fork, ``fork_seq`` 0, keeps them all)."""
    if not fork_seq:
        return replayed
    return replace(
        replayed,
        new_entries=[
            entry
            for entry in replayed.new_entries
            if entry.left_seq is None or entry.left_seq > fork_seq
        ],
        new_indices=[
            index
            for index in replayed.new_indices
            if index.to_seq is None or index.to_seq > fork_seq
        ],
        forgotten={seq: ids for seq, ids in replayed.forgotten.items() if seq > fork_seq},
    )
