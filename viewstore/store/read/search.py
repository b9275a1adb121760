"""Full-text search over the log (docs/search.md): the statements, and their cursor.

The index is the backend's own, kept by the database with every write of a payload (an
append by any path, a redaction, a compaction, an erasure; migrations/versions/0027_baseline.py):
on PostgreSQL a GIN index over ``PG_DOCUMENT``, an expression of the payload, and on SQLite the
FTS5 table ``events_search`` keyed by the log row's ``position``. A search is one statement:
the index finds the rows holding every word, the filters narrow them, and a page of them in
rank order (best first, then conversation and seq) is read, keyset paged by the last hit's
(rank, conversation, seq). The texts here must stay the baseline's, word for word, or
PostgreSQL would not use its index (tests/store/test_search_plans.py).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from viewstore.domain.errors import InvalidArgumentError
from viewstore.domain.order_key import SEQ_WIDTH
from viewstore.store.database.schema import events
from viewstore.store.read.lineage import Segment

#: = the baseline's PG_SEARCH_DOCUMENT, the indexed expression.
PG_DOCUMENT = (
    "to_tsvector('simple', CAST(CASE WHEN strpos(payload, E'\\\\u0000') = 0 "
    "THEN payload ELSE replace(replace(replace(payload, E'\\\\\\\\', chr(1)), "
    "E'\\\\u0000', E'\\\\ufffd'), chr(1), E'\\\\\\\\') END AS jsonb))"
)
CURSOR_PREFIX = "s1."
MAX_LIMIT = 200
#: The largest cursor accepted (a conversation id is at most 255 characters).
MAX_CURSOR = 1024


@dataclass(frozen=True)
class Filters:
    """What a search is narrowed to (None: not narrowed)."""

    searched: str | None = None  # the conversation searched
    segments: Sequence[Segment] | None = None  # its lineage
    kinds: Sequence[str] | None = None
    sources: Sequence[str] | None = None
    since: datetime | None = None  # appended at or after
    until: datetime | None = None  # appended before
    window: str | None = None  # "live" or "forgotten"
    live_ids: Sequence[str] | None = None  # the searched conversation's live view


@dataclass(frozen=True)
class Position:
    rank: float
    conversation_id: str
    seq: int


def encode_cursor(position: Position) -> str:
    raw = json.dumps([position.rank, position.conversation_id, position.seq])
    return CURSOR_PREFIX + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: object) -> Position:
    bad = f"after must be a cursor a search returned, got {cursor!r}"
    if not isinstance(cursor, str) or not cursor.startswith(CURSOR_PREFIX):
        raise InvalidArgumentError(bad)
    if len(cursor) > MAX_CURSOR:
        raise InvalidArgumentError("after must be a cursor a search returned (too long)")
    body = cursor[len(CURSOR_PREFIX) :]
    try:
        found = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode())
    except (binascii.Error, ValueError) as error:
        raise InvalidArgumentError(f"{bad} (it does not decode)") from error
    if not (
        isinstance(found, list)
        and len(found) == 3
        and isinstance(found[0], int | float)
        and not isinstance(found[0], bool)
        and isinstance(found[1], str)
        and isinstance(found[2], int)
        and not isinstance(found[2], bool)
    ):
        raise InvalidArgumentError(f"{bad} (not a search position)")
    return Position(float(found[0]), found[1], found[2])


# An event's view row is keyed by its seq for life (viewstore/domain/order_key.py, seq_key):
# one primary-key lookup, in the view of the conversation whose log holds the event. A summary
# placed at the end of a view has its condensation's seq key: not the condensation's row.
_KEY = {
    "postgresql": f"lpad(CAST(e.seq AS text), {SEQ_WIDTH}, '0')",
    "sqlite": f"printf('%0{SEQ_WIDTH}d', e.seq)",
}
_ROW = "v.conversation_id = e.conversation_id AND v.order_key = {key} AND NOT v.is_summary"
_LIVE = "EXISTS (SELECT 1 FROM view_entries v WHERE " + _ROW + " AND v.left_seq IS NULL)"
# Out of a view it was in: its holder's, or (a fork's search) the fork's own.
_LEFT = (
    "EXISTS (SELECT 1 FROM view_entries v WHERE v.conversation_id IN (e.conversation_id, "
    ":searched) AND v.order_key = {key} AND NOT v.is_summary AND v.left_seq IS NOT NULL)"
)


def _filters(f: Filters, params: dict[str, Any], key: str) -> list[str]:
    clauses: list[str] = []
    if f.segments is not None:
        spans = []
        for i, segment in enumerate(f.segments):
            params[f"seg_c{i}"], params[f"seg_a{i}"] = segment.conversation_id, segment.after
            span = f"(e.conversation_id = :seg_c{i} AND e.seq > :seg_a{i}"
            if segment.upto is not None:
                params[f"seg_u{i}"] = segment.upto
                span += f" AND e.seq <= :seg_u{i}"
            spans.append(span + ")")
        clauses.append("(" + " OR ".join(spans) + ")")
    for column, values in (("kind", f.kinds), ("source", f.sources)):
        if values is not None:
            names = [f"{column}{i}" for i in range(len(values))]
            params.update(zip(names, values, strict=True))
            clauses.append(f"e.{column} IN ({', '.join(':' + n for n in names)})")
    if f.since is not None:
        params["since"] = f.since
        clauses.append("e.recorded_at >= :since")
    if f.until is not None:
        params["until"] = f.until
        clauses.append("e.recorded_at < :until")
    clauses.extend(_window(f, params, key))
    return clauses


def _window(f: Filters, params: dict[str, Any], key: str) -> list[str]:
    """In the live view now, or forgotten: the searched conversation's view when one was
    given (``live_ids``), else the view of the conversation whose log holds the event."""
    if f.window is None:
        return []
    if f.live_ids is None:
        live = _LIVE.format(key=key)
    else:
        names = [f"live{i}" for i in range(len(f.live_ids))]
        params.update(zip(names, f.live_ids, strict=True))
        live = f"e.event_id IN ({', '.join(':' + n for n in names)})" if names else "1 = 0"
    return [live] if f.window == "live" else [_LEFT.format(key=key), f"NOT ({live})"]


def _keyset(after: Position | None, params: dict[str, Any]) -> str:
    if after is None:
        return "1 = 1"
    params.update(after_rank=after.rank, after_c=after.conversation_id, after_s=after.seq)
    return (
        "(rank < :after_rank OR (rank = :after_rank AND (conversation_id > :after_c "
        "OR (conversation_id = :after_c AND seq > :after_s))))"
    )


def search(
    conn: Connection, words: list[str], f: Filters, after: Position | None, limit: int
) -> list[Any]:
    """Up to ``limit`` hits after ``after``, best first: rows of (conversation_id, seq,
    event_id, kind, source, timestamp, recorded_at, payload, own_live: 1 when the live view of
    the conversation holding it has it, rank)."""
    found, params = statement(conn.dialect.name, words, f, after, limit)
    # Typed, so SQLite's stored text comes back as the datetime the column holds.
    typed = text(found).columns(recorded_at=events.c.recorded_at.type)
    return list(conn.execute(typed, params))


def statement(
    dialect: str, words: list[str], f: Filters, after: Position | None, limit: int
) -> tuple[str, dict[str, Any]]:
    """The search's SQL text and its parameters."""
    params: dict[str, Any] = {"limit": limit, "searched": f.searched or ""}
    key = _KEY["postgresql" if dialect == "postgresql" else "sqlite"]
    clauses = _filters(f, params, key)
    columns = (
        "e.conversation_id AS conversation_id, e.seq AS seq, e.event_id AS event_id, "
        "e.kind AS kind, e.source AS source, e.timestamp AS timestamp, "
        "e.recorded_at AS recorded_at, e.payload AS payload, "
        f"CASE WHEN {_LIVE.format(key=key)} THEN 1 ELSE 0 END AS own_live"
    )
    if dialect == "postgresql":
        params["query"] = " & ".join(words)
        inner = (
            f"SELECT {columns}, CAST(ts_rank({PG_DOCUMENT}, q.query) AS double precision) AS rank "
            f"FROM events e, to_tsquery('simple', :query) AS q(query) "
            f"WHERE {PG_DOCUMENT} @@ q.query"
        )
    else:
        # Each word a phrase of its own (quoted, so none reads as an FTS5 operator): all must
        # be there.
        params["query"] = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        inner = (
            f"SELECT {columns}, -bm25(events_search) AS rank FROM events_search "
            "JOIN events e ON e.position = events_search.rowid WHERE events_search MATCH :query"
        )
    inner += "".join(f" AND {clause}" for clause in clauses)
    found = (
        f"SELECT * FROM ({inner}) AS hits WHERE {_keyset(after, params)} "
        "ORDER BY rank DESC, conversation_id, seq LIMIT :limit"
    )
    return found, params
