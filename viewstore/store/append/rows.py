"""Row-level SQL for one conversation. Every function takes an open ``Connection`` and never
commits: the transaction belongs to the public ``EventStore`` method that called it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    Connection,
    Row,
    and_,
    bindparam,
    func,
    insert,
    or_,
    select,
    text,
    update,
)

from viewstore.domain.chain import event_hash
from viewstore.domain.kinds import Role
from viewstore.domain.projector import Projection, ProjectionState, ViewEntry
from viewstore.domain.view import TrackerState
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database import backends
from viewstore.store.database.forgotten import not_in_view
from viewstore.store.database.schema import (
    condensations,
    conversations,
    events,
    manipulation_indices,
    view_entries,
)
from viewstore.store.read import lineage, logged_ids, reads, sizes

if TYPE_CHECKING:
    from viewstore.domain.events import Event

K = TypeVar("K", str, int)
CHUNK = 500  # ids per IN (...) list: far below every backend's bound-parameter limit


# Hot-path statements are built once: constructing a SQLAlchemy statement per call cost more
# than executing it. Each takes only bound parameters.
_STORED_IDS: Any = bindparam("event_ids", expanding=True)
_LOCK_FOR_APPEND = select(
    conversations,
    select(events.c.seq)
    # The conversation is named, not correlated to the outer row: a sharded server routes a
    # subquery by its own equality on the distribution column (docs/distribution.md).
    .where(
        events.c.conversation_id == bindparam("conversation_id"),
        events.c.event_id.in_(_STORED_IDS),
    )
    .exists()
    .label("has_stored"),
).where(conversations.c.id == bindparam("conversation_id"))
# PostgreSQL asks for each id alone (``keyed``: one lookup of the unique id index an id). Given
# the ids as one IN list, a store never analyzed planned that index for its first column only
# and read the conversation's every log row, filtering the ids
# (tests/store/test_unanalyzed_plans.py).
_LOCK_FOR_APPEND_PG = (
    f"SELECT {', '.join(c.name for c in conversations.c)}, EXISTS ({{}}) AS has_stored "
    "FROM conversations WHERE id = :conversation_id FOR UPDATE OF conversations"
)
_STATE_COLUMNS = (
    "version",
    "unhandled_request",
    "view_length",
    "pending_tool_calls",
    "in_tool_loop",
    "last_is_action",
    "last_batch",
    "last_hash",
    "updated_at",
)
_SAVE_STATE = (
    update(conversations)
    .where(conversations.c.id == bindparam("b_conversation"))
    .values({name: bindparam(f"new_{name}") for name in _STATE_COLUMNS})
)
_INSERT_EVENTS = insert(events)
_INSERT_EVENTS_SQLITE = insert(events).values(
    position=select(func.coalesce(func.max(events.c.position), 0) + 1).scalar_subquery(),
    txid=0,
)
_INSERT_ENTRIES = insert(view_entries)
_INSERT_INDICES = insert(manipulation_indices)
_CLOSE_INDEX = (
    update(manipulation_indices)
    .where(
        manipulation_indices.c.conversation_id == bindparam("b_conversation"),
        manipulation_indices.c.position == bindparam("b_position"),
        manipulation_indices.c.to_seq.is_(None),
    )
    .values(to_seq=bindparam("b_to_seq"))
)


def chunks(items: Sequence[K], size: int = CHUNK) -> Iterable[Sequence[K]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# -- the conversation row -----------------------------------------------------------------


def lock_for_append(
    conn: Connection, conversation_id: str, event_ids: Sequence[str]
) -> tuple[Row[Any] | None, bool]:
    """Lock the conversation row (see ``lock_conversation``) and, in the same statement, ask
    whether any of ``event_ids`` is already stored there: the common case, none, then costs no
    second query. Batches longer than one IN list are simply assumed to need the full check."""
    if not event_ids or len(event_ids) > CHUNK:
        return lock_conversation(conn, conversation_id), bool(event_ids)
    if conn.dialect.name == "postgresql":
        _, bound = reads.bind_list("e", list(event_ids))
        stored = backends.of(conn).keyed(
            "1", "events", "conversation_id = :conversation_id", "event_id", bound
        )
        query: Any = text(_LOCK_FOR_APPEND_PG.format(stored))
        params: dict[str, Any] = {"conversation_id": conversation_id, **bound}
    else:
        query, params = (
            _LOCK_FOR_APPEND,
            {"conversation_id": conversation_id, "event_ids": list(event_ids)},
        )
    row = conn.execute(query, params).first()
    return row, bool(row is not None and row.has_stored)


def create_conversation(conn: Connection, conversation_id: str, now: datetime) -> Row[Any]:
    """Insert an empty conversation row (a concurrent creator may win; we then lock theirs)."""
    values = state_values(ProjectionState(), last_hash="0" * 64)
    values.update(id=conversation_id, created_at=now, updated_at=now)
    insert = backends.of(conn).insert(conversations).values(values).on_conflict_do_nothing()
    # RETURNING: the driver's row count of an INSERT is not always given (psycopg: -1).
    if conn.execute(insert.returning(conversations.c.id)).first() is not None:
        sizes.created(conn, conversation_id, 0, 0)
    row = lock_conversation(conn, conversation_id)
    assert row is not None  # just inserted, or inserted by the transaction we waited for
    return row


def not_before(now: datetime, previous: datetime | None) -> datetime:
    """The time to record an append at: ``now``, but never before the conversation's previous
    append. Appends are serialised per conversation, yet ``now`` is read before the lock is
    taken, and writers' clocks differ: without this, ``recorded_at`` could go backwards along
    seq, and verify could not tell a backdated event from a slow clock."""
    if previous is None:
        return now
    if previous.tzinfo is None:  # SQLite keeps no offset; it was written in UTC
        previous = previous.replace(tzinfo=now.tzinfo)
    return max(now, previous)


def state_values(state: ProjectionState, last_hash: str) -> dict[str, Any]:
    tracker = state.tracker
    return {
        "version": state.version,
        "unhandled_request": state.unhandled_request,
        "view_length": tracker.length,
        "pending_tool_calls": json.dumps(sorted(tracker.pending, key=str)),
        "in_tool_loop": tracker.in_loop,
        "last_is_action": tracker.last_is_action,
        "last_batch": tracker.last_batch,
        "last_hash": last_hash,
    }


def state_from_row(row: Row[Any]) -> ProjectionState:
    tracker = TrackerState(
        length=row.view_length,
        pending=frozenset(json.loads(row.pending_tool_calls)),
        in_loop=row.in_tool_loop,
        last_is_action=row.last_is_action,
        last_batch=row.last_batch,
    )
    return ProjectionState(
        version=row.version, unhandled_request=row.unhandled_request, tracker=tracker
    )


def save_state(
    conn: Connection, conversation_id: str, state: ProjectionState, last_hash: str, now: datetime
) -> None:
    values = state_values(state, last_hash)
    values["updated_at"] = now
    params = {f"new_{name}": value for name, value in values.items()}
    params["b_conversation"] = conversation_id
    conn.execute(_SAVE_STATE, params)


# -- events -------------------------------------------------------------------------------


def stored_payloads(conn: Connection, row: Any, ids: Sequence[str]) -> dict[str, str]:
    """Payloads already stored under these event ids in the conversation of ``row`` (its
    ``conversations`` row), a fork's shared prefix included."""
    found: dict[str, str] = {}
    for segment in lineage.segments(conn, row):
        in_segment = events.c.seq > segment.after
        if segment.upto is not None:
            in_segment = in_segment & (events.c.seq <= segment.upto)
        for part in chunks(ids):
            rows = conn.execute(
                select(events.c.event_id, events.c.payload).where(
                    events.c.conversation_id == segment.conversation_id,
                    events.c.event_id.in_(part),
                    in_segment,
                )
            )
            found.update({row.event_id: row.payload for row in rows})
    return found


def payloads_at(conn: Connection, row: Any, first: int, last: int) -> list[str]:
    """The payloads at seqs ``first`` to ``last`` of the conversation of ``row``."""
    found: list[str] = []
    for segment in lineage.segments(conn, row):
        bounds = segment.clamp(first - 1, last)
        if bounds is None:
            continue
        rows = conn.execute(
            select(events.c.payload)
            .where(
                events.c.conversation_id == segment.conversation_id,
                events.c.seq > bounds[0],
                events.c.seq <= (last if bounds[1] is None else bounds[1]),
            )
            .order_by(events.c.seq)
        )
        found.extend(row.payload for row in rows)
    return found


def log_rows(
    key: str,
    numbered: Sequence[tuple[int, Event]],
    last_hash: str,
    now: datetime,
    chain_key: bytes | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """The ``events`` rows of a batch with their chained hashes (chain scheme 2), and the new
    last hash."""
    out = []
    for seq, event in numbered:
        last_hash = event_hash(last_hash, seq, event.id, event.payload_json, chain_key)
        out.append(
            {
                "conversation_id": key,
                "seq": seq,
                "event_id": event.id,
                "kind": event.kind,
                "source": event.source,
                "timestamp": event.timestamp,
                "parent_id": event.parent_id,
                "payload": event.payload_json,
                "hash": last_hash,
                "recorded_at": now,
            }
        )
    return out, last_hash


def insert_events(conn: Connection, rows: list[dict[str, Any]], *, in_order: bool = False) -> None:
    """Insert log rows; the database assigns each its change-feed ``position`` (and ``txid``).

    PostgreSQL fills both from column defaults set by the migration: a sequence (no lock;
    gaps from rolled-back transactions are harmless) and the writing transaction's id, which
    lets the feed wait for slower transactions. On SQLite, the single writer under
    BEGIN IMMEDIATE makes ``max(position) + 1`` safe, row by row, and commit order is position
    order; ``txid`` is 0 there. ``in_order``: ``check_not_overtaken`` after the insert.
    """
    postgres = conn.dialect.name == "postgresql"
    conn.execute(_INSERT_EVENTS if postgres else _INSERT_EVENTS_SQLITE, rows)
    if in_order and rows:
        check_not_overtaken(conn, rows[0]["conversation_id"], rows[0]["seq"])


class Overtaken(Exception):
    """The append's transaction id is below that of the conversation's event before it: the
    feed, which hands events out in ``(txid, position)`` order, would give them before that
    earlier seq. ``EventStore.append`` rolls back and runs the append again."""


# Both reads of ``events`` name the conversation, so a sharded server routes it to one shard;
# each is one lookup of the primary key (as a join, a store never analyzed read the
# conversation's whole log for the predecessor: tests/store/test_unanalyzed_plans.py).
_OVERTAKEN = text(
    "SELECT 1 FROM events e WHERE e.conversation_id = :conversation_id AND e.seq = :seq "
    "AND e.txid < (SELECT p.txid FROM events p WHERE p.conversation_id = :conversation_id "
    "AND p.seq = :seq - 1)"
)


def check_not_overtaken(conn: Connection, conversation_id: str, first_seq: int) -> None:
    """Raise ``Overtaken`` if the events just inserted from ``first_seq`` on carry a txid below
    their predecessor's (PostgreSQL; SQLite's txid is always 0).

    PostgreSQL gives a transaction its id when it first locks or writes a row, and the
    ordinary path's ``SELECT ... FOR UPDATE`` takes the id while it still waits for the
    conversation's row: writers that queued later but got the lock first then commit later
    seqs under higher ids, and the feed would hand this append's events out before theirs
    (seen with 20 threads on 2 conversations, on PostgreSQL and on Citus). Run again in a new
    transaction, the append gets an id above every committed one. The fast path and the
    server-side append write only after their guard wins the row, so they never need this."""
    if conn.dialect.name != "postgresql" or first_seq <= 1:
        return
    found = conn.execute(_OVERTAKEN, {"conversation_id": conversation_id, "seq": first_seq})
    if found.first() is not None:
        raise Overtaken(conversation_id)


def without_nul(value: str | None) -> str | None:
    """For analyst columns: PostgreSQL text cannot hold NUL (U+FFFD stands in on every backend).
    The exact text stays in the event's payload and in the summary entry's JSON."""
    return None if value is None else value.replace("\x00", "\ufffd")


def insert_condensations(
    conn: Connection,
    conversation_id: str,
    condensed: list[tuple[int, Event]],
    forgotten: dict[int, set[str]],
) -> None:
    """The condensations' rows; what each forgot is its payload's list, and which of those
    were not in the view its ``not_in_view`` (``condensation_forgotten`` shows both)."""
    conn.execute(
        insert(condensations),
        [
            {
                "conversation_id": conversation_id,
                "seq": seq,
                "event_id": event.id,
                "summary": without_nul(event.summary),
                "summary_offset": event.summary_offset,
                "not_in_view": not_in_view(event.forgotten_event_ids, forgotten.get(seq, set())),
            }
            for seq, event in condensed
        ],
    )


# -- the projection -----------------------------------------------------------------------


# A condensation reruns the view rules over the current entries and only ever closes them (new
# rows come from events), so it loads no copies: on a long view they are most of the bytes.
_RULE_NAMES = (
    "order_key", "event_id", "seq", "kind", "role", "tool_call_id", "llm_response_id",
    "thinking", "entered_seq", "left_seq", "is_summary", "holder",
)  # fmt: skip
_SEQ, _HOLDER, _ID, _KIND, _IS_SUMMARY = (
    _RULE_NAMES.index(name) for name in ("seq", "holder", "event_id", "kind", "is_summary")
)
# What a row holds of its event: a summary's, or a copy a row of a store migrating to revision
# 0022 still carries; the rest is read from the log (``_logged_fields``).
_FIELDS = ("payload", "source", "timestamp", "parent_id")
_COPY_COLUMNS = tuple(view_entries.c[name] for name in _FIELDS)


def _rule_rows(
    conn: Connection, conversation_id: str, *where: Any, copies: bool = False
) -> list[Sequence[Any]]:
    """The rows of ``conversation_id`` that match ``where``, in view order: the columns of
    ``_RULE_NAMES`` (an event's id and kind from its log row: ``logged_ids``), then with
    ``copies`` those of ``_FIELDS``."""
    log, joined = backends.of(conn).log_rows(
        and_(
            events.c.conversation_id == conversation_id,
            events.c.seq == view_entries.c.seq,
            view_entries.c.holder.is_(None),
        )
    )
    own_log = view_entries.outerjoin(log, joined)
    logged = {
        "event_id": func.coalesce(view_entries.c.event_id, log.c.event_id),
        "kind": func.coalesce(view_entries.c.kind, log.c.kind),
    }
    columns = [logged.get(name, view_entries.c[name]) for name in _RULE_NAMES]
    found = conn.execute(
        select(*columns, *(_COPY_COLUMNS if copies else ()))
        .select_from(own_log)
        .where(view_entries.c.conversation_id == conversation_id, *where)
        .order_by(view_entries.c.order_key)
    ).all()
    return logged_ids.from_holders(
        conn, [tuple(row) for row in found], seq=_SEQ, holder=_HOLDER, event_id=_ID, kind=_KIND
    )


def _entry_from_row(row: Sequence[Any], **copies: Any) -> ViewEntry:
    values = dict(zip(_RULE_NAMES, row, strict=False))
    return ViewEntry(
        order_key=values["order_key"],
        id=values["event_id"],
        seq=values["seq"],
        kind=values["kind"],
        role=Role(values["role"]),
        tool_call_id=values["tool_call_id"],
        llm_response_id=values["llm_response_id"],
        thinking=values["thinking"],
        entered_seq=values["entered_seq"],
        left_seq=values["left_seq"],
        is_summary=values["is_summary"],
        **copies,
    )


def load_current_view(
    conn: Connection, conversation_id: str, as_of: int | None = None
) -> list[ViewEntry]:
    """The current entries (or those alive right after ``as_of``), for the view rules only:
    without their copies (``payload`` None)."""
    alive = (
        view_entries.c.left_seq.is_(None)
        if as_of is None
        else alive_at(view_entries.c.entered_seq, view_entries.c.left_seq, as_of)
    )
    return [_entry_from_row(row) for row in _rule_rows(conn, conversation_id, alive)]


def load_all_entries(conn: Connection, conversation_id: str) -> list[ViewEntry]:
    """Every entry the conversation ever had, complete as a read sees it (an event's payload
    and fields from the log its row names, a summary's from the row)."""
    rows = _rule_rows(conn, conversation_id, copies=True)
    logged = _logged_fields(conn, conversation_id, rows)
    found = []
    for row in rows:
        own = list(row[len(_RULE_NAMES) :])
        if not row[_IS_SUMMARY]:
            log = logged.get((row[_HOLDER] or conversation_id, row[_SEQ]), (None,) * len(_FIELDS))
            own = [
                mine if mine is not None else theirs for mine, theirs in zip(own, log, strict=True)
            ]
        found.append(_entry_from_row(row, **dict(zip(_FIELDS, own, strict=True))))
    return found


def _logged_fields(
    conn: Connection, conversation_id: str, rows: Sequence[Sequence[Any]]
) -> dict[tuple[str, int], tuple[Any, ...]]:
    """The log's payload and fields of the events these rows name, by (holder, seq): one
    statement per holder and few hundred seqs, each naming a single conversation."""
    wanted: dict[str, list[int]] = {}
    for row in rows:
        if not row[_IS_SUMMARY]:
            wanted.setdefault(row[_HOLDER] or conversation_id, []).append(row[_SEQ])
    return reads.logged_by_seq(conn, wanted, ", ".join(_FIELDS))


def load_index_rows(conn: Connection, conversation_id: str) -> list[tuple[int, int, int | None]]:
    rows = conn.execute(
        select(
            manipulation_indices.c.position,
            manipulation_indices.c.from_seq,
            manipulation_indices.c.to_seq,
        ).where(manipulation_indices.c.conversation_id == conversation_id)
    )
    return [(row.position, row.from_seq, row.to_seq) for row in rows]


def load_open_indices(conn: Connection, conversation_id: str) -> set[int]:
    rows = conn.execute(
        select(manipulation_indices.c.position).where(
            manipulation_indices.c.conversation_id == conversation_id,
            manipulation_indices.c.to_seq.is_(None),
        )
    )
    return {row.position for row in rows}


def entry_params(
    conversation_id: str, entry: ViewEntry, holder: str | None = None
) -> dict[str, Any]:
    """One ``view_entries`` row, every column: the one definition both write paths use. An
    event's payload and fields are the log's (not written here); a summary's are the row's.
    ``holder``: the conversation whose log holds the event, if not ``conversation_id``."""
    if entry.payload is None:
        # Only entries loaded for a condensation lack their copies, and those are never new.
        raise ValueError(f"view entry {entry.id!r} has no payload to write")
    own = entry.is_summary
    return {
        "conversation_id": conversation_id,
        "order_key": entry.order_key,
        "event_id": entry.id if own else None,
        "seq": entry.seq,
        "kind": entry.kind if own else None,
        "role": entry.role.value,
        "tool_call_id": entry.tool_call_id,
        "llm_response_id": entry.llm_response_id,
        "thinking": entry.thinking,
        "entered_seq": entry.entered_seq,
        "left_seq": entry.left_seq,
        "payload": entry.payload if own else None,
        "source": entry.source if own else None,
        "timestamp": entry.timestamp if own else None,
        "parent_id": entry.parent_id if own else None,
        "is_summary": entry.is_summary,
        "envelope": None,  # a read builds the Event from its payload (docs/schema.md)
        "holder": holder,
    }


def write_projection(
    conn: Connection,
    conversation_id: str,
    projection: Projection,
    parts: Sequence[lineage.Segment] = (),
) -> None:
    """Write exactly the row changes the projector returned, one statement per kind. ``parts``:
    the conversation's lineage where its rows may name events of its sources (a rebuild of a
    fork); an append's new rows are always of its own events."""
    if projection.new_entries:
        conn.execute(
            _INSERT_ENTRIES,
            [
                entry_params(conversation_id, entry, lineage.holder(parts, entry.seq))
                for entry in projection.new_entries
            ],
        )
    for seq, keys in _by_seq(projection.closed_entries).items():
        for part in chunks(keys):
            conn.execute(
                update(view_entries)
                .where(
                    view_entries.c.conversation_id == conversation_id,
                    view_entries.c.order_key.in_(part),
                )
                .values(left_seq=seq)
            )
    _close_indices(conn, conversation_id, projection.closed_indices)
    if projection.new_indices:
        conn.execute(
            _INSERT_INDICES,
            [
                {
                    "conversation_id": conversation_id,
                    "position": row.position,
                    "from_seq": row.from_seq,
                    "to_seq": row.to_seq,
                }
                for row in projection.new_indices
            ],
        )


def _close_indices(conn: Connection, conversation_id: str, closed: dict[int, int]) -> None:
    if len(closed) == 1:  # a plain append closes at most one index: the prebuilt statement
        ((position, seq),) = closed.items()
        params = {"b_conversation": conversation_id, "b_position": position, "b_to_seq": seq}
        conn.execute(_CLOSE_INDEX, params)
        return
    for seq, positions in _by_seq(closed).items():
        for batch in chunks(positions):
            conn.execute(
                update(manipulation_indices)
                .where(
                    manipulation_indices.c.conversation_id == conversation_id,
                    manipulation_indices.c.position.in_(batch),
                    manipulation_indices.c.to_seq.is_(None),
                )
                .values(to_seq=seq)
            )


def _by_seq(closed: dict[K, int]) -> dict[int, list[K]]:
    """Group closed rows by the seq that closed them: a condensation closes many rows at one
    seq, which is then one UPDATE ... IN (...) rather than one statement per row."""
    groups: dict[int, list[K]] = {}
    for key, seq in closed.items():
        groups.setdefault(seq, []).append(key)
    return groups


def alive_at(start: Any, end: Any, seq: int) -> Any:
    """SQL condition: a row with lifetime ``[start, end)`` exists right after event ``seq``."""
    return and_(start <= seq, or_(end.is_(None), end > seq))
