"""An event's id and kind, for a view row that names its event by seq.

An event's row in ``view_entries`` holds no copy of its event's id or kind: both are in its
log row, found by the row's ``seq`` in its own conversation's log, or, for a fork's row copied
from its source, in the log of the conversation its ``holder`` names. A summary's row holds its
own (the log has no row of it).

A reader joins its own conversation's log (``OWN_LOG``) and takes the row's value or the log's
(``EVENT_ID``, ``EVENT_KIND``); the rows naming a holder get theirs from ``from_holders``,
one statement per holder, so that every statement names a single conversation (a store
sharded by conversation routes each to one shard: docs/distribution.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from viewstore.store.database import backends
from viewstore.store.read.reads import logged_by_seq

#: The row ``v``'s event id and kind: its own, or its conversation's log's (``OWN_LOG``).
EVENT_ID = "COALESCE(v.event_id, e.event_id)"
EVENT_KIND = "COALESCE(v.kind, e.kind)"
#: The log row ``e`` of a row ``v`` of conversation ``:c`` that names no holder, by backend.
OWN_LOG = backends.spelled("{log}", "e.conversation_id = :c AND e.seq = v.seq AND v.holder IS NULL")


def from_holders(
    conn: Connection,
    rows: Sequence[Sequence[Any]],
    *,
    seq: int,
    holder: int,
    event_id: int,
    kind: int | None = None,
) -> list[Sequence[Any]]:
    """``rows`` (tuples; the positions of their seq, holder, id and kind given), each that
    names a holder and has no id given the id and kind its holder's log holds at its seq."""
    wanted: dict[str, list[int]] = {}
    for row in rows:
        if row[event_id] is None and row[holder] is not None:
            wanted.setdefault(row[holder], []).append(row[seq])
    if not wanted:
        return list(rows)
    logged = logged_by_seq(conn, wanted, "event_id, kind")
    filled: list[Sequence[Any]] = []
    for row in rows:
        if row[event_id] is not None or row[holder] is None:
            filled.append(row)
            continue
        found_id, found_kind = logged.get((row[holder], row[seq]), (None, None))
        changed = list(row)
        changed[event_id] = found_id
        if kind is not None:
            changed[kind] = found_kind
        filled.append(changed)
    return filled
