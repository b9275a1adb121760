"""The conversation catalogue: one record per conversation, from its row alone.

Everything a list of conversations shows is kept on the ``conversations`` row by every append
(version, view length, request flag, times); the last event's kind is one primary-key lookup
in the log (its seq is the version), and what its agent server said of it one in
``conversation_sources`` (docs/schema.md). Its first user message, what a person recognises a
conversation by where no agent server gave it a title, is one more query for the whole page
(and its payloads a second): a range of each listed conversation's first
``FIRST_MESSAGE_WITHIN`` seqs in the log's primary key, read where the lineage keeps them (a
fork's first events are its source's). Listing a store therefore never reads a view or scans a
log, whatever the conversations' sizes.

Every order is served by an index of ``conversations`` that ends in ``id`` (the primary key for
``id``, ``ix_conversations_<order>_id`` for the others), read forwards or
backwards: a page reads its own rows, not the catalogue. Keyset paging: a cursor carries the
order, its direction and the last row's (value, id); the next page is the rows strictly after
that pair in the order, ``WHERE (column, id) > (value, id)`` (``<`` descending), one range read
of the same index however deep the page. Rows appended or moved meanwhile are seen or not
according to where they now sort, never twice in one order unless they moved past the cursor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Table,
    and_,
    func,
    literal_column,
    or_,
    select,
    text,
    tuple_,
    union_all,
)

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.cursors import (
    EXACT_COUNT_LIMIT,
    Cursor,
    Order,
    check_limit,
    check_order,
    parse_cursor,
)
from viewstore.store.database.schema import (
    catalogue_sizes,
    conversation_sources,
    conversations,
    events,
)
from viewstore.store.read import sizes
from viewstore.store.read.lineage import MAX_DEPTH
from viewstore.store.read.reads import aware, comparable
from viewstore.store.records import ConversationInfo

#: The first user message is looked for among a conversation's first this many events: an
#: OpenHands conversation starts with its system prompt, a few state updates and the user's
#: request, and a log that holds none there is not read further (its record says None).
FIRST_MESSAGE_WITHIN = 32
#: A first message is cut to this many characters (its whitespace collapsed): enough for any
#: list to shorten further, and a record stays small however long the message was.
FIRST_MESSAGE_CHARS = 200
#: Page rows are looked up in groups of this many (bound parameters per statement).
_LOOKUP_CHUNK = 500


def check_options(
    *,
    search: str = "",
    order_by: str = "id",
    limit: int | None = None,
    offset: int = 0,
    updated_since: datetime | None = None,
    min_view_length: int | None = None,
    descending: bool = False,
    after: str | None = None,
) -> Cursor | None:
    """Raise ``InvalidArgumentError`` for a bad option; the parsed ``after`` cursor, if any."""
    if not isinstance(search, str):
        raise InvalidArgumentError(f"search must be text, got {search!r}")
    check_order(order_by)
    for name, value in (("offset", offset), ("min_view_length", min_view_length)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(f"{name} must be a non-negative integer, got {value!r}")
    if limit is not None:
        check_limit(limit)
    if updated_since is not None and (
        not isinstance(updated_since, datetime) or updated_since.tzinfo is None
    ):
        raise InvalidArgumentError(
            f"updated_since must be a timezone-aware datetime, got {updated_since!r}"
        )
    return None if after is None else parse_cursor(after, order_by, descending)


def _filtered(
    conn: Connection,
    query: Any,  # a Select of any columns (SQLAlchemy's generic Select defeats a TypeVar)
    search: str,
    updated_since: datetime | None,
    min_view_length: int | None,
) -> Any:
    c = conversations
    if search:
        query = query.where(c.c.id.contains(search, autoescape=True))
    if updated_since is not None:
        query = query.where(c.c.updated_at >= comparable(conn, updated_since))
    if min_view_length is not None:
        query = query.where(c.c.view_length >= min_view_length)
    return query


def count_catalogue(
    conn: Connection,
    *,
    search: str = "",
    updated_since: datetime | None = None,
    min_view_length: int | None = None,
) -> int:
    query = select(func.count()).select_from(conversations)
    total = conn.execute(_filtered(conn, query, search, updated_since, min_view_length)).scalar()
    return int(total or 0)


@dataclass(frozen=True)
class CatalogueCount:
    """How many conversations match (``store.conversation_count_estimate()``): ``count``, and
    whether it is ``exact`` (a count) or the server's estimate (PostgreSQL, above
    ``EXACT_COUNT_LIMIT``)."""

    count: int
    exact: bool

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "exact": self.exact}


def planned_rows(conn: Connection, query: Any) -> int | None:
    """PostgreSQL's estimate of the rows ``query`` (a Select) returns: its plan's, no row read;
    None for a plan the server does not estimate itself (Citus's distributed scan)."""
    compiled = query.compile(dialect=conn.dialect)
    raw = conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + str(compiled), compiled.params)
    found: Any = raw.scalar()
    plan = (json.loads(found) if isinstance(found, str) else found)[0]["Plan"]
    if plan.get("Node Type") == "Custom Scan":
        return None
    return int(plan.get("Plan Rows", 0))


def live_rows(conn: Connection, table: str) -> int | None:
    """PostgreSQL's statistics collector's count of the live rows of ``table`` (all its
    partitions; None: none counted). Every insert and delete keeps it, whether or not the
    table was ever analyzed: a table never analyzed (autovacuum off, just loaded) is
    estimated by the planner from its pages and a guessed row width, 15,204 rows for the
    100,000 measured. It restarts from zero when the server's statistics are reset."""
    live = conn.execute(
        text(
            "SELECT sum(n_live_tup) FROM pg_stat_user_tables "
            "WHERE relid = to_regclass(:t) OR relid IN "
            "(SELECT inhrelid FROM pg_inherits WHERE inhparent = to_regclass(:t))"
        ),
        {"t": table},
    ).scalar()
    return int(live) if live else None


def _rescaled(conn: Connection, estimate: int, planned_whole: int | None) -> int:
    """``estimate`` scaled by the live rows counted over the rows the planner expects in the
    whole catalogue (the two agree where the table has statistics)."""
    live = live_rows(conn, "conversations")
    if not live or not planned_whole:
        return estimate
    return round(estimate * live / planned_whole)


def estimate_catalogue(
    conn: Connection,
    *,
    search: str = "",
    updated_since: datetime | None = None,
    min_view_length: int | None = None,
    exact_up_to: int = EXACT_COUNT_LIMIT,
) -> CatalogueCount:
    """A count where one is cheap, the planner's estimate where it would not be.

    PostgreSQL's count reads every matching row (or index entry), so there the planner's row
    estimate of the same filtered query is asked first (``EXPLAIN``: the table's statistics
    scaled to its current size, the filters' selectivities; no row is read); only at or below
    ``exact_up_to`` is the count made. A plan the server does not estimate itself (Citus's
    distributed scan) is counted. SQLite keeps no row count and its count reads the smallest
    index whole (37 ms at 300,000 conversations, cold): unfiltered, it counts at most
    ``exact_up_to + 1`` rows, and above that answers the largest rowid, the number of
    catalogue rows ever inserted less those deleted from its top (``sqlite_rows``).
    A filtered count on SQLite is exact and may grow with the store."""
    if conn.dialect.name == "sqlite" and not (
        search or updated_since is not None or min_view_length is not None
    ):
        return sqlite_rows(conn, conversations, exact_up_to)
    if conn.dialect.name == "postgresql":
        whole = select(conversations.c.id)
        query = _filtered(conn, whole, search, updated_since, min_view_length)
        estimate = planned_rows(conn, query)
        if estimate is not None:
            estimate = _rescaled(
                conn, estimate, planned_rows(conn, whole) if query is not whole else estimate
            )
        if estimate is not None and estimate > exact_up_to:
            return CatalogueCount(count=estimate, exact=False)
    counted = count_catalogue(
        conn, search=search, updated_since=updated_since, min_view_length=min_view_length
    )
    return CatalogueCount(count=counted, exact=True)


def sqlite_rows(conn: Connection, table: Table, exact_up_to: int) -> CatalogueCount:
    """A SQLite table's rows: counted up to ``exact_up_to``, else bounded from above.

    SQLite gives a new row the largest rowid plus one, so the largest rowid is an upper bound
    of the rows there: exact until a row is deleted (a prune, an erasure), then too high by
    the deleted rows below it. One B-tree descent, where a count reads the table's smallest
    index whole."""
    head = select(literal_column("1")).select_from(table).limit(exact_up_to + 1).subquery()
    seen = conn.execute(select(func.count()).select_from(head)).scalar_one()
    if seen <= exact_up_to:
        return CatalogueCount(count=seen, exact=True)
    top = conn.execute(select(func.max(literal_column("rowid"))).select_from(table)).scalar()
    return CatalogueCount(count=max(seen, int(top or 0)), exact=False)


@dataclass(frozen=True)
class _Filters:
    search: str
    updated_since: datetime | None
    min_view_length: int | None

    def on(self, conn: Connection, query: Any, copy: Any) -> Any:
        """``_filtered``, but ``min_view_length`` on ``copy``'s view length (a range of its
        index when that is the order)."""
        query = _filtered(conn, query, self.search, self.updated_since, None)
        if self.min_view_length is not None:
            query = query.where(copy.c.view_length >= self.min_view_length)
        return query


def _past(conn: Connection, column: Any, key: Any, after: Cursor | None, descending: bool) -> Any:
    """The rows strictly after the cursor in the order by ``column`` (None: by id alone) and
    then ``key``: a row-value comparison, which both backends read as one range of the
    order's index."""
    if after is None:
        return None
    if column is None:
        return key < after.id if descending else key > after.id
    value = after.value
    if isinstance(value, datetime):
        value = comparable(conn, value)
    position, past = tuple_(column, key), (value, after.id)
    return position < past if descending else position > past


def _size_page(
    conn: Connection,
    order_by: str,
    filters: _Filters,
    *,
    descending: bool,
    rows_wanted: int | None,
    after: Cursor | None,
) -> Any:
    """The ids of a page in a size order, with the value each is ordered by: the copies in
    ``catalogue_sizes`` of the conversations that have not changed since (a range of the
    order's index there), and the present figures of those that have (a range of
    ``updated_at``), merged (viewstore/store/read/sizes.py)."""
    c, s = conversations, catalogue_sizes
    start = sizes.since(conn)
    kept = (
        select(s.c.conversation_id.label("id"), s.c[order_by].label("value"))
        .select_from(s.join(c, c.c.id == s.c.conversation_id))
        .where(sizes.unchanged(start))
    )
    kept = filters.on(conn, kept, s)
    moved = select(c.c.id.label("id"), c.c[order_by].label("value")).where(sizes.changed(start))
    moved = filters.on(conn, moved, c)
    if after is not None:
        kept = kept.where(_past(conn, s.c[order_by], s.c.conversation_id, after, descending))
        moved = moved.where(_past(conn, c.c[order_by], c.c.id, after, descending))
    if descending:
        kept = kept.order_by(s.c[order_by].desc(), s.c.conversation_id.desc())
    else:
        kept = kept.order_by(s.c[order_by], s.c.conversation_id)
    if rows_wanted is not None:
        kept = kept.limit(rows_wanted)
    first = kept.subquery()
    merged = union_all(select(first.c.id, first.c.value), moved).subquery("merged")
    # The page's ids alone, sorted and cut, before any other table is joined: the joins are
    # then a primary-key lookup per listed row, whatever the planner thinks the merge holds.
    page = select(merged.c.id, merged.c.value)
    if descending:
        page = page.order_by(merged.c.value.desc(), merged.c.id.desc())
    else:
        page = page.order_by(merged.c.value, merged.c.id)
    return page.limit(rows_wanted).subquery("page")


def read_catalogue(
    conn: Connection,
    *,
    search: str = "",
    order_by: Order = "id",
    descending: bool = False,
    limit: int | None = None,
    offset: int = 0,
    updated_since: datetime | None = None,
    min_view_length: int | None = None,
    after: Cursor | None = None,
) -> list[ConversationInfo]:
    c = conversations
    info = conversation_sources.c
    query = select(
        c.c.id,
        c.c.created_at,
        c.c.updated_at,
        c.c.version,
        c.c.view_length,
        c.c.unhandled_request,
        events.c.kind,
        info.title,
        info.source,
        info.execution_status,
        info.llm_model,
        c.c.forked_from,
        c.c.fork_seq,
    )
    # Both joins are primary-key lookups per listed row: the page is still read from the
    # order's index alone.
    if order_by in sizes.SIZE_ORDERS:
        wanted = None if limit is None else offset + limit
        page = _size_page(
            conn,
            order_by,
            _Filters(search, updated_since, min_view_length),
            descending=descending,
            rows_wanted=wanted,
            after=after,
        )
        source: Any = page.join(c, c.c.id == page.c.id)
        column, key = page.c.value, page.c.id
    else:
        source = c
        column, key = c.c[order_by], c.c.id
        query = _filtered(conn, query, search, updated_since, min_view_length)
        if after is not None:
            by = None if order_by == "id" else column
            query = query.where(_past(conn, by, key, after, descending))
    query = query.select_from(
        source.outerjoin(
            events, and_(events.c.conversation_id == c.c.id, events.c.seq == c.c.version)
        ).outerjoin(conversation_sources, info.conversation_id == c.c.id)
    )
    if order_by == "id":
        query = query.order_by(key.desc() if descending else key)
    elif descending:
        query = query.order_by(column.desc(), key.desc())
    else:
        query = query.order_by(column, key)
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    rows = list(conn.execute(query))
    first = first_messages(conn, rows)
    return [
        ConversationInfo(
            id=row.id,
            created_at=aware(row.created_at),
            updated_at=aware(row.updated_at),
            version=row.version,
            view_length=row.view_length,
            unhandled_condensation_request=bool(row.unhandled_request),
            last_event_kind=row.kind,
            title=row.title,
            agent_server=row.source,
            execution_status=row.execution_status,
            llm_model=row.llm_model,
            first_message=first.get(row.id),
        )
        for row in rows
    ]


@dataclass(frozen=True)
class _Span:
    """Seqs ``after + 1 .. upto`` of a listed conversation, kept in ``holder``'s log."""

    holder: str
    after: int
    upto: int


def _spans(conn: Connection, rows: list[Any]) -> dict[str, list[_Span]]:
    """Where each listed conversation keeps its first ``FIRST_MESSAGE_WITHIN`` events,
    oldest first. A fork's events up to its fork seq are its source's (``lineage``): its
    sources are read one generation at a time, for the whole page at once."""
    spans: dict[str, list[_Span]] = {}
    walking: dict[str, tuple[str, int]] = {}  # listed id -> (the next source to read, upto)
    for row in rows:
        own = min(int(row.fork_seq or 0), FIRST_MESSAGE_WITHIN)
        spans[row.id] = []
        if own < FIRST_MESSAGE_WITHIN:
            spans[row.id].append(_Span(row.id, own, FIRST_MESSAGE_WITHIN))
        if row.forked_from is not None and own > 0:
            walking[row.id] = (row.forked_from, own)
    for _ in range(MAX_DEPTH):
        if not walking:
            return spans
        sources = {source for source, _ in walking.values()}
        found: dict[str, Any] = {}
        c = conversations.c
        for chunk in _chunks(sorted(sources)):
            query = select(c.id, c.forked_from, c.fork_seq).where(c.id.in_(chunk))
            found.update((r.id, r) for r in conn.execute(query))
        going: dict[str, tuple[str, int]] = {}
        for key, (source, upto) in walking.items():
            row = found.get(source)
            if row is None:  # the store refuses to erase a source: this is damage; show none
                continue
            after = min(int(row.fork_seq or 0), upto)
            if after < upto:
                spans[key].insert(0, _Span(source, after, upto))
            if row.forked_from is not None and after > 0:
                going[key] = (row.forked_from, after)
        walking = going
    raise RuntimeError("a fork lineage on this page does not end")


def _chunks(keys: list[str]) -> list[list[str]]:
    return [keys[i : i + _LOOKUP_CHUNK] for i in range(0, len(keys), _LOOKUP_CHUNK)]


def first_messages(conn: Connection, rows: list[Any]) -> dict[str, str]:
    """The first user message of each of ``rows`` (catalogue rows: ``id``, ``forked_from``,
    ``fork_seq``) that has one among its first ``FIRST_MESSAGE_WITHIN`` events, by id."""
    if not rows:
        return {}
    spans = _spans(conn, rows)
    e = events.c
    seqs: dict[str, list[int]] = {}
    holders = sorted({span.holder for found in spans.values() for span in found})
    for chunk in _chunks(holders):
        # Only ids and seqs: the payloads, which can be large, are read for the chosen rows.
        query = select(e.conversation_id, e.seq).where(
            e.conversation_id.in_(chunk),
            e.seq <= FIRST_MESSAGE_WITHIN,
            e.kind == "MessageEvent",
            e.source == "user",
        )
        for holder, seq in conn.execute(query):
            seqs.setdefault(holder, []).append(int(seq))
    chosen: dict[str, tuple[str, int]] = {}
    for key, found in spans.items():
        for span in found:
            inside = [s for s in seqs.get(span.holder, ()) if span.after < s <= span.upto]
            if inside:
                chosen[key] = (span.holder, min(inside))
                break
    payloads: dict[tuple[str, int], str] = {}
    wanted = sorted(set(chosen.values()))
    for i in range(0, len(wanted), _LOOKUP_CHUNK):
        pairs = wanted[i : i + _LOOKUP_CHUNK]
        query = select(e.conversation_id, e.seq, e.payload).where(
            or_(*(and_(e.conversation_id == h, e.seq == s) for h, s in pairs))
        )
        for row in conn.execute(query):
            payloads[(row.conversation_id, int(row.seq))] = row.payload
    texts = {key: message_line(payloads.get(place)) for key, place in chosen.items()}
    return {key: text for key, text in texts.items() if text}


def message_line(payload: str | None) -> str | None:
    """A stored message event's text on one line, cut to ``FIRST_MESSAGE_CHARS``; None if it
    holds no text (an image only, a redacted message, a payload that is not an object)."""
    try:
        found = json.loads(payload) if payload is not None else None
    except ValueError:
        return None
    message = found.get("llm_message") if isinstance(found, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    line = " ".join(_texts(content).split())
    if len(line) > FIRST_MESSAGE_CHARS:
        line = line[: FIRST_MESSAGE_CHARS - 1] + "…"
    return line or None


def _texts(content: Any) -> str:
    """The text parts of a message's content (a string, or a list of ``{"type": "text",
    "text": ...}`` parts among images and others)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    parts = [p.get("text") if isinstance(p, dict) else p for p in content]
    return " ".join(p for p in parts if isinstance(p, str))
