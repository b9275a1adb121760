"""Read queries: the materialized view (current or as of a seq), and the log itself.

Reading a view never replays the log: the current view is one range scan of the partial index
``ix_view_entries_current`` and an as-of view one scan of the conversation's rows by their
lifetimes, each row joined to its event's row in the log by the log's primary key (a view row
carries no copy of its payload: docs/schema.md). Those scans go straight to the driver's
cursor, and the events are built only when asked for (``StoredEvents``): a view read then
costs about what a bare ``SELECT payload`` of the same rows costs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Row, select, text

from viewstore.domain.errors import ConversationNotFoundError
from viewstore.domain.kinds import STATE_UPDATE_KIND, SUMMARY_SUFFIX
from viewstore.domain.order_key import seq_key
from viewstore.store.database import backends
from viewstore.store.database.schema import conversations, events
from viewstore.store.database.translate import driver_errors
from viewstore.store.read import lineage
from viewstore.store.read.stored_events import StoredEvents
from viewstore.store.records import StoredEvent, StoredView


def conversation_row(conn: Connection, conversation_id: str) -> Row[Any]:
    row = conn.execute(select(conversations).where(conversations.c.id == conversation_id)).first()
    if row is None:
        raise ConversationNotFoundError(conversation_id)
    return row


# Parameters are written :name; _driver_sql rewrites them for drivers that want %(name)s.
_CONVERSATION = (
    "SELECT version, unhandled_request, id, forked_from, fork_seq FROM conversations WHERE id = :c"
)
# An event's payload is the log's, joined on its primary key; a summary's is its row's (the
# log has no row of it: the join finds its condensation's, which the coalesce passes over).
# Only the id and the payload: every field of the Event is in its payload. An event's id is
# its log row's too; a summary's row holds its own id and payload, and the outer join finds no
# log row for it.
_ENTRY = "SELECT COALESCE(v.event_id, e.event_id), COALESCE(v.payload, e.payload) FROM"
_OWN_ROW = "e.conversation_id = :c AND e.seq = v.seq"
_ENTRIES = backends.spelled(
    f"{_ENTRY} view_entries v {{log}} WHERE v.conversation_id = :c AND ", _OWN_ROW
)
# A fork's copied rows name the conversation whose log holds their event (``holder``): read
# apart, then each holder's payloads by their seqs, so every statement still names a single
# conversation (a store sharded by conversation routes each to one shard; a join to another
# conversation's log would span two).
_FORK_ENTRIES = (
    "SELECT v.event_id, v.payload, v.seq, v.holder FROM view_entries v "
    "WHERE v.conversation_id = :c AND "
)
_CURRENT = "v.left_seq IS NULL ORDER BY v.order_key"
_AS_OF = "v.entered_seq <= :s AND (v.left_seq IS NULL OR v.left_seq > :s) ORDER BY v.order_key"
# Every row, alive or left: verify reads each as a view read would (``read_every_row``).
_EVERY = "1 = 1 ORDER BY v.order_key"
#: (current, as of a seq, every row), by backend and by whether the rows may name a holder
#: (a fork's).
_VIEW_ENTRIES = {
    (name, fork): (entries + _CURRENT, entries + _AS_OF, entries + _EVERY)
    for name, own in _ENTRIES.items()
    for fork, entries in ((False, own), (True, _FORK_ENTRIES))
}
# A page of the view takes its rows first and only then their log rows: joined before the
# LIMIT, every row before the page had its payload read too.
#: (current, as of a seq), by backend.
_PAGES = tuple(
    backends.spelled(
        f"{_ENTRY} (SELECT * FROM view_entries v WHERE v.conversation_id = :c AND {rows} "
        "LIMIT :n OFFSET :o) v {log} ORDER BY v.order_key",
        _OWN_ROW,
    )
    for rows in (_CURRENT, _AS_OF)
)
_INDICES = "SELECT position FROM manipulation_indices WHERE conversation_id = :c AND "
_CURRENT_INDICES = _INDICES + "to_seq IS NULL ORDER BY position"
_INDICES_AS_OF = _INDICES + "from_seq <= :s AND (to_seq IS NULL OR to_seq > :s) ORDER BY position"


_PAGE = " LIMIT :n OFFSET :o"
_CONVERSATION_LENGTH = "SELECT view_length FROM conversations WHERE id = :c"
_LENGTH_AS_OF = (
    "SELECT count(*) FROM view_entries WHERE conversation_id = :c "
    "AND entered_seq <= :s AND (left_seq IS NULL OR left_seq > :s)"
)


def view_length(conn: Connection, conversation_id: str, as_of: int | None) -> int:
    if as_of is not None:
        conversation_id = _rows_holding(conn, conversation_id, as_of)
    params = {"c": conversation_id, "s": as_of}
    ((length,),) = _fetch(conn, _CONVERSATION_LENGTH if as_of is None else _LENGTH_AS_OF, params)
    return int(length)


def read_view(
    conn: Connection,
    conversation_id: str,
    as_of: int | None,
    first: int = 0,
    limit: int | None = None,
) -> StoredView:
    """The view now or right after ``as_of``; with a ``limit``, only its events at positions
    ``first`` to ``first + limit - 1`` (the indices and the flag are still the whole view's)."""
    params = {"c": conversation_id, "s": as_of, "n": limit, "o": first}
    page = "" if limit is None else _PAGE
    found = _fetch(conn, _CONVERSATION, params)
    if not found:
        raise ConversationNotFoundError(conversation_id)
    version, unhandled, *lineage_columns = found[0]
    row = _LineageRow(*lineage_columns)
    fork = lineage.is_fork(row)
    current_entries, entries_as_of, _ = _VIEW_ENTRIES[conn.dialect.name, fork]
    if limit is not None and not fork:
        current_entries, entries_as_of = (paged[conn.dialect.name] for paged in _PAGES)
        page = ""
    fetch = _fork_entries if fork else _fetch
    if as_of is None:
        entries = fetch(conn, current_entries + page, params)
        indices = _fetch(conn, _CURRENT_INDICES, params)
    else:
        version, unhandled = as_of, unhandled_as_of(conn, row, as_of)
        params["c"] = lineage.owner(conn, row, as_of)
        entries = fetch(conn, entries_as_of + page, params)
        indices = _fetch(conn, _INDICES_AS_OF, params)
    return StoredView(
        conversation_id=conversation_id,
        version=version,
        events=StoredEvents(entries),
        manipulation_indices=[position for (position,) in indices],
        unhandled_condensation_request=bool(unhandled),
        as_of=as_of,
    )


def read_every_row(conn: Connection, conversation_id: str) -> Sequence[Any]:
    """Every view row the conversation holds, alive or left, in key order, as (event id,
    payload) exactly as a view read returns them: the statements and the lookups of
    ``read_view``, with no lifetime in the condition. ``verify`` checks what a reader is sent
    with it, not only the columns it is built from."""
    row = lineage_row(conn, conversation_id)
    fork = lineage.is_fork(row)
    fetch = _fork_entries if fork else _fetch
    return fetch(conn, _VIEW_ENTRIES[conn.dialect.name, fork][2], {"c": conversation_id})


def in_view(
    conn: Connection, conversation_id: str, event_ids: Sequence[str], as_of: int | None
) -> set[str]:
    """Which of ``event_ids`` the view holds (now, or right after ``as_of``): a summary by the
    id its row holds, an event by its seq in the lineage's logs, which is its row's key
    (``viewstore.domain.order_key``; its row names it by seq only)."""
    if not event_ids:
        return set()
    _, bound = bind_list("e", event_ids)
    if as_of is not None:
        conversation_id = _rows_holding(conn, conversation_id, as_of)
    row = lineage_row(conn, conversation_id)
    alive = (
        "left_seq IS NULL"
        if as_of is None
        else ("entered_seq <= :s AND (left_seq IS NULL OR left_seq > :s)")
    )
    params: dict[str, Any] = {"c": row.id, "s": as_of}
    found: set[str] = set()
    # No index finds a summary's row by its id, so the statement reads the view's rows: asked
    # only for ids a summary can have (Event.summary_id), which an event's id seldom is.
    summary_ids = [event_id for event_id in event_ids if event_id.endswith(SUMMARY_SUFFIX)]
    if summary_ids:
        listed_summaries, bound_summaries = bind_list("e", summary_ids)
        summaries = _HELD_SUMMARIES.format(listed_summaries, alive)
        found.update(str(i) for (i,) in _fetch(conn, summaries, {**params, **bound_summaries}))
    named: dict[int, str] = {}
    # By the unique (conversation_id, event_id) index; the segment's bounds are applied to what
    # it finds (given to the server, they made SQLite scan the log's primary key instead).
    logged_ids = backends.of(conn).keyed(
        "seq, event_id", "events", "conversation_id = :h", "event_id", bound
    )
    for segment in lineage.segments(conn, row):
        upto = _END if segment.upto is None else segment.upto
        part = {"h": segment.conversation_id, "lo": segment.after, "hi": upto}
        for seq, event_id in _fetch(conn, logged_ids, {**part, **bound}):
            if part["lo"] < seq <= part["hi"]:
                named[int(seq)] = str(event_id)
    seqs = sorted(named)
    for start in range(0, len(seqs), _IN_LIST):
        _, bound_keys = bind_list("k", [seq_key(seq) for seq in seqs[start : start + _IN_LIST]])
        held_events = backends.of(conn).keyed(
            "seq", "view_entries", f"conversation_id = :c AND NOT is_summary AND {alive}",
            "order_key", bound_keys,
        )  # fmt: skip
        held = _fetch(conn, held_events, {**params, **bound_keys})
        found.update(named[int(seq)] for (seq,) in held)
    return found


_HELD_SUMMARIES = (
    "SELECT event_id FROM view_entries WHERE conversation_id = :c AND is_summary "
    "AND event_id IN ({}) AND {}"
)


def last_state_update(conn: Connection, conversation_id: str, key: str) -> str | None:
    """The payload text of the newest ``ConversationStateUpdateEvent`` of ``key`` in the
    conversation's log (a fork's inherited prefix included), None without one. The filter runs
    in SQL, newest first: no event is parsed in Python (an agent server's reload looks for its
    goal status this way in a log that may hold none)."""
    row = lineage_row_or_none(conn, conversation_id)
    if row is None:
        return None
    field = backends.of(conn).json_text("payload", "key")
    sql = (
        "SELECT payload FROM events WHERE conversation_id = :c AND seq > :a AND seq <= :b "
        f"AND kind = :kind AND {field} = :k ORDER BY seq DESC LIMIT 1"
    )
    for segment in reversed(lineage.segments(conn, row)):
        params = {
            "c": segment.conversation_id,
            "a": segment.after,
            "b": segment.upto or _END,
            "kind": STATE_UPDATE_KIND,
            "k": key,
        }
        found = _fetch(conn, sql, params)
        if found:
            return str(found[0][0])
    return None


_END = 2**62  # past any seq


def _fork_entries(conn: Connection, sql: str, params: dict[str, Any]) -> Sequence[Any]:
    """A fork's view rows (``_FORK_ENTRIES``) as (event id, payload): an event's, which the row
    does not hold, is read from its holder's log (the row's own conversation's when it names
    none), by seq, a few hundred at a time.

    A summary's row holds its own id and payload; every other row holds neither."""
    found = _fetch(conn, sql, params)
    wanted: dict[str, list[int]] = {}
    for own_id, payload, seq, holder in found:
        if payload is None or own_id is None:
            wanted.setdefault(holder or params["c"], []).append(seq)
    logged = logged_by_seq(conn, wanted, "event_id, payload")
    entries = []
    for own_id, own_payload, seq, holder in found:
        # Own: a summary's.
        if own_payload is not None and own_id is not None:
            entries.append((own_id, own_payload))
            continue
        logged_id, payload = logged.get((holder or params["c"], seq), (None, None))
        entries.append((own_id or logged_id, own_payload if own_payload is not None else payload))
    return entries


def logged_by_seq(
    conn: Connection, wanted: dict[str, list[int]], columns: str
) -> dict[tuple[str, int], tuple[Any, ...]]:
    """The log's ``columns`` of the events at these seqs of each conversation (``wanted``), by
    (conversation, seq): one statement per conversation and few hundred seqs, so each names a
    single conversation."""
    logged: dict[tuple[str, int], tuple[Any, ...]] = {}
    for holder, seqs in wanted.items():
        for start in range(0, len(seqs), _IN_LIST):
            _, bound = bind_list("q", seqs[start : start + _IN_LIST])
            sql = backends.of(conn).keyed(
                f"seq, {columns}", "events", "conversation_id = :h", "seq", bound
            )
            for seq, *values in _fetch(conn, sql, {"h": holder, **bound}):
                logged[holder, seq] = tuple(values)
    return logged


_IN_LIST = 500  # seqs per IN (...): far below every backend's bound-parameter limit
_Bound = TypeVar("_Bound", str, int)


class _LineageRow(NamedTuple):
    id: str
    forked_from: str | None
    fork_seq: int | None


_LINEAGE = "SELECT id, forked_from, fork_seq FROM conversations WHERE id = :c"


def lineage_row_or_none(conn: Connection, conversation_id: str) -> _LineageRow | None:
    found = _fetch(conn, _LINEAGE, {"c": conversation_id})
    return _LineageRow(*found[0]) if found else None


def lineage_row(conn: Connection, conversation_id: str) -> _LineageRow:
    found = lineage_row_or_none(conn, conversation_id)
    if found is None:
        raise ConversationNotFoundError(conversation_id)
    return found


def _rows_holding(conn: Connection, conversation_id: str, as_of: int) -> str:
    """Whose view rows hold the view right after ``as_of`` (see ``lineage.owner``)."""
    return lineage.owner(conn, lineage_row(conn, conversation_id), as_of)


def bind_list(prefix: str, values: Sequence[_Bound]) -> tuple[str, dict[str, _Bound]]:
    """The placeholders of an IN list (``:p0, :p1, ...``) and their parameters."""
    names = [f"{prefix}{i}" for i in range(len(values))]
    return ", ".join(f":{name}" for name in names), dict(zip(names, values, strict=True))


def _fetch(conn: Connection, sql: str, params: dict[str, Any]) -> Sequence[Any]:
    """Every row as the driver's own tuple. Through SQLAlchemy's result objects, a 9,300-event
    view took 2 ms more on SQLite (0.2 µs a row), a tenth of the whole read."""
    style = _PARAMSTYLES.get(conn.dialect.name, conn.dialect.paramstyle)
    if style not in ("named", "pyformat"):
        return list(conn.execute(text(sql), params))  # a driver we have not measured
    with driver_errors(conn):
        cursor = conn.connection.cursor()
        try:
            cursor.execute(_driver_sql(sql, style), params)
            rows: Sequence[Any] = cursor.fetchall()
        finally:
            cursor.close()
    return rows


# sqlite3 declares qmark but takes :name too; SQLAlchemy's dialect says what the others take.
_PARAMSTYLES = {"sqlite": "named"}


@cache
def _driver_sql(sql: str, style: str) -> str:
    return sql if style == "named" else re.sub(r":(\w+)", r"%(\1)s", sql)


# The kind is spelled in the text, not bound: that is what lets the planner use the partial
# index of requests (ix_events_requests).
_LAST_REQUEST = (
    "SELECT max(seq) FROM events WHERE conversation_id = :c "
    "AND kind = 'CondensationRequest' AND seq > :a AND seq <= :s"
)
_LAST_CONDENSATION = (
    "SELECT max(seq) FROM condensations WHERE conversation_id = :c AND seq > :a AND seq <= :s"
)


def unhandled_as_of(conn: Connection, row: Any, seq: int) -> bool:
    """The request flag right after ``seq``: is the last request newer than the last
    condensation? One lookup in the partial index of requests, one in condensations' key
    (per conversation of a fork's lineage, newest first, until both are found)."""
    request = condensation = None
    for segment in reversed(lineage.segments(conn, row)):
        bounds = segment.clamp(0, seq)
        if bounds is None:
            continue
        params = {"c": segment.conversation_id, "a": bounds[0], "s": bounds[1]}
        if request is None:
            ((request,),) = _fetch(conn, _LAST_REQUEST, params)
        if condensation is None:
            ((condensation,),) = _fetch(conn, _LAST_CONDENSATION, params)
        if request is not None and condensation is not None:
            break
    return int(request or 0) > int(condensation or 0)


def read_events(
    conn: Connection,
    conversation_id: str,
    *,
    after: int = 0,
    limit: int | None = None,
    upto: int | None = None,
) -> list[StoredEvent]:
    """The log after seq ``after`` (through ``upto``), a fork's shared prefix included."""
    found: list[StoredEvent] = []
    for segment in lineage.segments(conn, conversation_row(conn, conversation_id)):
        bounds = segment.clamp(after, upto)
        if bounds is None:
            continue
        left = None if limit is None else limit - len(found)
        if left is not None and left <= 0:
            break
        found.extend(_segment_events(conn, conversation_id, segment, bounds, left))
    return found


def _segment_events(
    conn: Connection,
    conversation_id: str,
    segment: lineage.Segment,
    bounds: tuple[int, int | None],
    limit: int | None,
) -> list[StoredEvent]:
    query = (
        select(
            events.c.seq,
            events.c.event_id,
            events.c.kind,
            events.c.payload,
            events.c.recorded_at,
            events.c.hash,
        )
        .where(events.c.conversation_id == segment.conversation_id, events.c.seq > bounds[0])
        .order_by(events.c.seq)
    )
    if bounds[1] is not None:
        query = query.where(events.c.seq <= bounds[1])
    if limit is not None:
        # Seqs are dense (a log holds every seq up to its version), so the page is also a
        # range of the primary key: bounded, a store never analyzed read every event after
        # ``after`` and sorted them for the first ``limit`` (tests/store/test_unanalyzed_plans.py).
        query = query.where(events.c.seq <= bounds[0] + limit).limit(limit)
    return [
        StoredEvent(
            conversation_id=conversation_id,
            seq=row.seq,
            event_id=row.event_id,
            kind=row.kind,
            payload_json=row.payload,
            recorded_at=aware(row.recorded_at),
            hash=row.hash,
        )
        for row in conn.execute(query)
    ]


def comparable(conn: Connection, value: datetime) -> datetime:
    """``value`` as a bound parameter that compares with stored times: SQLite compares the
    stored text, written in UTC without an offset, so it gets the same form."""
    utc = value.astimezone(UTC)
    return utc.replace(tzinfo=None) if conn.dialect.name == "sqlite" else utc


def aware(value: datetime) -> datetime:
    """SQLite keeps no offset: its timestamps were written in UTC, so say so."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def exists(conn: Connection, conversation_id: str) -> bool:
    """Whether the conversation has a row (one primary-key lookup)."""
    query = select(conversations.c.id).where(conversations.c.id == conversation_id)
    return conn.execute(query).first() is not None


def conversation_ids(conn: Connection) -> list[str]:
    return [row.id for row in conn.execute(select(conversations.c.id).order_by(conversations.c.id))]


_LOG_INDEX = (
    "SELECT event_id, kind, parent_id FROM events WHERE conversation_id = :c "
    "AND seq > :a AND seq <= :b ORDER BY seq"
)


def log_index(conn: Connection, conversation_id: str) -> list[tuple[str, str, str | None]]:
    found: list[tuple[str, str, str | None]] = []
    row = lineage_row_or_none(conn, conversation_id)
    if row is None:
        return found
    for segment in lineage.segments(conn, row):
        params = {"c": segment.conversation_id, "a": segment.after, "b": segment.upto or _END}
        found.extend(tuple(row) for row in _fetch(conn, _LOG_INDEX, params))
    return found


_END = 2**62  # past any seq
