"""Every column of a conversation that its log determines, checked against the log.

The hash chain covers each event's seq, id and exact JSON. Everything else the store writes
is derived from those, and a database owner who switches the append-only guard off can change
it without breaking the chain: the ``kind`` column (which decides the as-of request flag and
what the change feed reports), the condensation rows analysts query, the conversation's
counters, the times. Each check here recomputes what it can from the payloads and names every
difference: the seq, the table and column, what was found and what the log says.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, select

from viewstore.domain.events import Event, Role
from viewstore.domain.projector import ProjectionState
from viewstore.store.append import rows
from viewstore.store.database.forgotten import not_in_view
from viewstore.store.database.schema import condensation_forgotten, condensations, events
from viewstore.store.read import lineage
from viewstore.store.read.reads import aware

#: Differences listed per check; the rest are counted, so one forged column over a million
#: rows does not print a million lines.
MAX_LISTED = 20

Log = Sequence[tuple[int, Event]]


def log_rows(conn: Connection, conv: Row[Any]) -> list[Row[Any]]:
    """Every column of the conversation's events (``conv``: its row), in seq order; a
    fork's shared prefix is its sources' rows."""
    found: list[Row[Any]] = []
    for segment in lineage.segments(conn, conv):
        query = select(events).where(
            events.c.conversation_id == segment.conversation_id, events.c.seq > segment.after
        )
        if segment.upto is not None:
            query = query.where(events.c.seq <= segment.upto)
        found.extend(conn.execute(query.order_by(events.c.seq)))
    return found


def capped(found: list[str], what: str) -> list[str]:
    if len(found) <= MAX_LISTED:
        return found
    return [*found[:MAX_LISTED], f"... and {len(found) - MAX_LISTED} more {what}"]


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def event_columns(stored: Sequence[Row[Any]], log: Log) -> list[str]:
    """The columns an event is indexed by, against its payload."""
    found = []
    for row, (seq, event) in zip(stored, log, strict=True):
        wanted = {
            "event_id": event.id,
            "kind": event.kind,
            "source": event.source,
            "timestamp": event.timestamp,
            "parent_id": event.parent_id,
        }
        for column, want in wanted.items():
            have = getattr(row, column)
            if have != want:
                found.append(
                    f"seq {seq}: events.{column} is {show(have)}, the payload says {show(want)}"
                )
    return capped(found, "differing event columns")


def times_and_feed(conv: Row[Any], stored: Sequence[Row[Any]]) -> list[str]:
    """What the order of appends fixes: ``recorded_at`` never decreases along seq (each append
    records at least its predecessor's time), the feed position always increases (it is drawn
    after the conversation is locked), and the conversation row's times are those of its first
    and last appends."""
    found: list[str] = []
    latest: tuple[int, datetime] | None = None
    highest: tuple[int, int] | None = None
    for row in stored:
        at = aware(row.recorded_at)
        if latest is not None and at < latest[1]:
            found.append(
                f"seq {row.seq}: events.recorded_at {at.isoformat()} is earlier than seq "
                f"{latest[0]}'s {latest[1].isoformat()}"
            )
        if latest is None or at >= latest[1]:
            latest = (row.seq, at)
        if highest is not None and row.position <= highest[1]:
            found.append(
                f"seq {row.seq}: events.position {row.position} is not after seq "
                f"{highest[0]}'s {highest[1]} (the change feed would reorder them)"
            )
        if highest is None or row.position > highest[1]:
            highest = (row.seq, row.position)
    if stored:
        first, last = aware(stored[0].recorded_at), aware(stored[-1].recorded_at)
        if aware(conv.created_at) > first:
            found.append(
                f"conversations.created_at {aware(conv.created_at).isoformat()} is later than "
                f"its first event's recorded_at {first.isoformat()}"
            )
        if aware(conv.updated_at) != last:
            found.append(
                f"conversations.updated_at is {aware(conv.updated_at).isoformat()}, its last "
                f"event's recorded_at {last.isoformat()}"
            )
    return capped(found, "differences in times and feed positions")


def conversation_columns(conv: Row[Any], state: ProjectionState) -> list[str]:
    """The carried projection state (what the next append builds on), column by column."""
    wanted = rows.state_values(state, conv.last_hash)
    found = []
    for column, want in wanted.items():
        if column in ("version", "last_hash"):
            continue  # checked with the chain, with a more telling message
        have = getattr(conv, column)
        if have != want:
            found.append(
                f"conversations.{column} is {show(have)}, replay says {show(want)} (the "
                "carried projection state differs from replay)"
            )
    return found


def condensation_rows(conn: Connection, key: str, log: Log) -> list[str]:
    """One ``condensations`` row per Condensation of the log, with its id, summary and offset."""
    wanted = {
        seq: {
            "event_id": event.id,
            "summary": rows.without_nul(event.summary),
            "summary_offset": event.summary_offset,
        }
        for seq, event in log
        if event.role is Role.CONDENSATION
    }
    query = select(condensations).where(condensations.c.conversation_id == key)
    have = {row.seq: row for row in conn.execute(query)}
    found = []
    for seq in sorted(wanted.keys() | have.keys()):
        want, row = wanted.get(seq), have.get(seq)
        if row is None:
            found.append(f"seq {seq}: the Condensation has no condensations row")
        elif want is None:
            found.append(
                f"seq {seq}: a condensations row (event {show(row.event_id)}) where the log "
                "holds no Condensation"
            )
        else:
            found.extend(
                f"seq {seq}: condensations.{column} is {show(getattr(row, column))}, the "
                f"payload says {show(value)}"
                for column, value in want.items()
                if getattr(row, column) != value
            )
    return capped(found, "differences in condensations rows")


def forgotten_rows(conn: Connection, key: str, log: Log, removed: dict[int, set[str]]) -> list[str]:
    """One ``condensation_forgotten`` row per id a Condensation lists, saying whether replay
    found it in the view (``removed``: the ids each condensation took out of it)."""
    wanted = {
        (seq, forgotten): forgotten in removed.get(seq, set())
        for seq, event in log
        if event.role is Role.CONDENSATION
        for forgotten in event.forgotten_event_ids
    }
    query = select(condensation_forgotten).where(condensation_forgotten.c.conversation_id == key)
    have = {(row.seq, row.event_id): row.was_in_view for row in conn.execute(query)}
    found = _not_in_view(conn, key, log, removed)
    for seq, forgotten in sorted(wanted.keys() | have.keys()):
        want, row = wanted.get((seq, forgotten)), have.get((seq, forgotten))
        if row is None:
            found.append(
                f"seq {seq}: the Condensation forgets {show(forgotten)} but its "
                "condensation_forgotten row is missing"
            )
        elif want is None:
            found.append(
                f"seq {seq}: a condensation_forgotten row for {show(forgotten)}, which the "
                "Condensation does not forget"
            )
        elif row != want:
            found.append(
                f"seq {seq}: condensation_forgotten.was_in_view of {show(forgotten)} is {row}, "
                f"replay says {want}"
            )
    return capped(found, "differences in condensation_forgotten rows")


def _not_in_view(conn: Connection, key: str, log: Log, removed: dict[int, set[str]]) -> list[str]:
    """``condensations.not_in_view`` as replay has it: what ``condensation_forgotten`` does not
    show (an id the condensation does not list, or the order) still must not be forged; every
    append writes it, so NULL is a forgery too."""
    wanted = {
        seq: not_in_view(event.forgotten_event_ids, removed.get(seq, set()))
        for seq, event in log
        if event.role is Role.CONDENSATION
    }
    query = select(condensations.c.seq, condensations.c.not_in_view).where(
        condensations.c.conversation_id == key
    )
    return [
        f"seq {seq}: condensations.not_in_view is {show(have)}, replay says {show(wanted[seq])}"
        for seq, have in conn.execute(query)
        if seq in wanted and have != wanted[seq]
    ]
