"""A conversation's resume view, and whether it equals the live view, at the cost of the view.

The resume view is ``View.from_events`` over the log: the live view (every event applied in
turn), then the properties enforced against the whole log (docs/semantics.md §5, §7). So it is
the live view less what enforcement removes, and the two are equal exactly when enforcement
removes nothing. Enforcement reads five narrow facts of each event (id, role, tool-call id, LLM
response id, thinking flag), and of the log it needs only what touches the tool events of the
view:

- ObservationUniqueness and ToolCallMatching read the view alone;
- BatchAtomicity compares, for each LLM response of a view action, the view's actions of that
  response with the log's. Every tool event enters the live view when it is appended (the
  projector never drops one on entry), so a log action missing from the view is a *forgotten*
  view row: one query for the forgotten actions of those responses finds them all;
- ToolLoopAtomicity reads the tool loops of the log. A loop never spans an event that is not
  a tool event, so every loop holding a view event lies between the last such event before the
  view's first tool event and the first after its last: only that stretch of the log is read.

A condensed conversation whose view keeps its recent steps thus reads its view, one probe per
end of the stretch and the stretch itself, not its 20,000-event history. The answer is the same
as enforcing against the whole log (tests/contract/test_live_equals_resume.py compares both on
every reference vector and on random streams, after every event).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import Connection

from viewstore.domain.kinds import KIND_ROLES, STATE_UPDATE_KIND, Role
from viewstore.domain.order_key import event_keys_between
from viewstore.domain.view.enforcement import enforce_properties
from viewstore.store.database import backends
from viewstore.store.read import lineage, logged_ids, reads
from viewstore.store.read.reads import _END, _fetch, bind_list


class _Item(NamedTuple):  # a ViewItem
    id: str
    role: Role
    tool_call_id: str | None
    llm_response_id: str | None
    thinking: bool


_ROLES = {role.value: role for role in Role}
_TOOL_ROLES = (Role.ACTION, Role.OBSERVATION)
# Spelled out, not bound: a fixed text keeps one plan per statement.
_TOOL_KINDS = ", ".join(
    f"'{kind}'" for kind, role in sorted(KIND_ROLES.items()) if role in _TOOL_ROLES
)
# An event's id is its log row's (docs/schema.md): the conversation's own log is joined, and a
# fork's copied rows get theirs from their holders' (``logged_ids``); the holder comes last.
_FACTS = f"v.seq, {logged_ids.EVENT_ID}, v.role, v.tool_call_id, v.llm_response_id, v.thinking"
#: By backend, as every statement below.
_SOURCE = {name: f"view_entries v {join}" for name, join in logged_ids.OWN_LOG.items()}
_ROWS = {name: f"FROM {source} WHERE v.conversation_id = :c" for name, source in _SOURCE.items()}
_CURRENT = {
    name: f"SELECT {_FACTS}, v.is_summary, v.holder {rows} AND v.left_seq IS NULL "
    "ORDER BY v.order_key"
    for name, rows in _ROWS.items()
}
# Each query reads one conversation's part of a lineage (a fork's sources hold its shared
# prefix, ``viewstore.store.read.lineage``): seqs, or for left rows the seqs they left at, in
# ``:lo < x <= :hi``. A conversation that is not a fork is one part, from 0 to the end.
# The actions that left the view are read through ix_view_entries_left_actions, whose
# predicate this repeats (docs/schema.md); a current row is in hand from the live view's read.
_FORGOTTEN_FACTS = f"{logged_ids.EVENT_ID}, v.llm_response_id, v.seq, v.holder"
_FORGOTTEN_WHERE = (
    "v.conversation_id = :c AND v.left_seq IS NOT NULL AND v.left_seq > :lo "
    "AND v.left_seq <= :hi AND v.role = 'action'"
)


def _breaks(not_breaks: str) -> tuple[str, str]:
    """The probes for the events that end the tool loops before and after a seq: the
    nearest events whose kind is not in ``not_breaks``."""
    probe = (
        "SELECT seq FROM events WHERE conversation_id = :c AND seq {} :s AND seq > :lo "
        f"AND seq <= :hi AND kind NOT IN ({not_breaks}) ORDER BY seq {{}} LIMIT 1"
    )
    return probe.format("<", "DESC"), probe.format(">", "ASC")


# Keyed by whether the log is read without its state updates (the SDK's cold load).
_BREAKS = {False: _breaks(_TOOL_KINDS), True: _breaks(f"{_TOOL_KINDS}, '{STATE_UPDATE_KIND}'")}
_STRETCH_LOG = (
    "SELECT seq, event_id, kind FROM events WHERE conversation_id = :c "
    "AND seq > :a AND seq < :b AND seq > :lo AND seq <= :hi ORDER BY seq"
)
# The stretch's rows that left are read by their keys from the primary key (an event's row is
# keyed by its seq: viewstore.domain.order_key), not from an index of their own
# (docs/schema.md): the stretch is short by construction, and its live rows, read and passed
# over here, are few.
_STRETCH_LEFT = {
    name: f"SELECT {_FACTS}, v.holder {rows} "
    "AND v.order_key > :ka AND v.order_key < :kb AND v.left_seq IS NOT NULL "
    "AND NOT v.is_summary AND v.seq > :a AND v.seq < :b AND v.seq > :lo AND v.seq <= :hi"
    for name, rows in _ROWS.items()
}


def _item(row: Any) -> _Item:
    _, event_id, role, call, response, thinking = row[:6]
    return _Item(event_id, _ROLES[role], call, response, bool(thinking))


def live_equals_resume(conn: Connection, conversation_id: str) -> bool:
    found = resume_items(conn, conversation_id)
    return found is not None and found[0] == found[1]


def resume_items(
    conn: Connection, conversation_id: str, *, skip_state_updates: bool = False
) -> tuple[list[_Item], list[_Item]] | None:
    """The live view's items and the resume view's (those enforcement keeps, in view order),
    or None where the rows cannot settle it (see ``_stretch``). ``skip_state_updates``:
    enforce against the log without its state updates, as the SDK's cold load of a linear
    log does (docs/semantics.md §9)."""
    c = conversation_id
    parts = [
        {"c": segment.conversation_id, "lo": segment.after, "hi": segment.upto or _END}
        for segment in lineage.segments(conn, reads.lineage_row(conn, c))
    ]
    current: list[_Item] = []
    held: dict[int, _Item] = {}  # the live view's events (not its summaries) by seq
    tool_seqs: list[int] = []
    responses: set[str | None] = set()
    for row in logged_ids.from_holders(
        conn, _fetch(conn, _CURRENT[conn.dialect.name], {"c": c}), seq=0, holder=7, event_id=1
    ):
        item = _item(row)
        current.append(item)
        if row[6]:
            continue
        held[row[0]] = item
        if item.role in _TOOL_ROLES:
            tool_seqs.append(row[0])
            if item.role is Role.ACTION:
                responses.add(item.llm_response_id)
    log = (
        _stretch(
            conn,
            c,
            parts,
            held,
            (min(tool_seqs), max(tool_seqs)),
            skip_state_updates=skip_state_updates,
        )
        if tool_seqs
        else []
    )
    if log is None:
        return None
    if responses:
        # The batches' actions that left the view, wherever they are in the log: after a
        # break, so that they join no tool loop of the stretch (none of them is in the view,
        # and a loop of them alone removes nothing).
        inside = {item.id for item in log}
        forgotten = [i for i in _forgotten_actions(conn, parts, responses) if i.id not in inside]
        if forgotten:
            log = [*log, _Item("", Role.OTHER, None, None, False), *forgotten]
    kept, _ = enforce_properties(current, log)
    return current, kept


Part = dict[str, Any]


def _forgotten_actions(
    conn: Connection, parts: list[Part], responses: set[str | None]
) -> list[_Item]:
    """The actions of these LLM responses (None: of none) that left the view: a row leaving
    at seq ``s`` is recorded by the conversation whose part of the lineage holds ``s``."""
    source = _SOURCE[conn.dialect.name]
    statements: list[tuple[str, dict[str, Any]]] = []
    named = sorted(r for r in responses if r is not None)
    if named:
        _, bound = bind_list("r", named)
        each = backends.of(conn).keyed(
            _FORGOTTEN_FACTS, source, _FORGOTTEN_WHERE, "v.llm_response_id", bound
        )
        statements.append((each, dict(bound)))
    if None in responses:
        statements.append(
            (
                f"SELECT {_FORGOTTEN_FACTS} FROM {source} WHERE {_FORGOTTEN_WHERE} "
                "AND v.llm_response_id IS NULL",
                {},
            )
        )
    return [
        _Item(event_id, Role.ACTION, None, response, False)
        for part in parts
        for sql, bound_ in statements
        for event_id, response, *_ in logged_ids.from_holders(
            conn, _fetch(conn, sql, {**part, **bound_}), seq=2, holder=3, event_id=0
        )
    ]


def _first(conn: Connection, sql: str, parts: list[Part], seq: int) -> int | None:
    for part in parts:
        found = _fetch(conn, sql, {**part, "s": seq})
        if found:
            return int(found[0][0])
    return None


def _stretch(
    conn: Connection,
    c: str,
    parts: list[Part],
    held: dict[int, _Item],
    tools: tuple[int, int],
    *,
    skip_state_updates: bool,
) -> list[_Item] | None:
    """The log between the events that bound the loops of the view's tool events at seqs
    ``tools`` (first, last); None where a tool event there has no view row (cannot happen by
    the projector's rules; the caller then enforces over the whole log).

    A tool event's facts come from its row in the live view (``held``) or from a row that
    left: the conversation's own (a fork's copy may leave after the fork) or, for an event of
    a source's part of the lineage, one that left there before the fork."""
    break_before, break_after = _BREAKS[skip_state_updates]
    before = _first(conn, break_before, list(reversed(parts)), tools[0])
    after = _first(conn, break_after, parts, tools[1])
    bounds = {"a": before or 0, "b": after or _END}
    rows = {seq: item for seq, item in held.items() if bounds["a"] < seq < bounds["b"]}
    own = {"c": c, "lo": -1, "hi": _END}
    for scope in (own, *(part for part in parts if part["c"] != c)):
        low, high = event_keys_between(
            max(bounds["a"], scope["lo"]), min(bounds["b"], scope["hi"] + 1)
        )
        keys = {"ka": low, "kb": high}
        left = _fetch(conn, _STRETCH_LEFT[conn.dialect.name], {**scope, **bounds, **keys})
        for row in logged_ids.from_holders(conn, left, seq=0, holder=6, event_id=1):
            rows.setdefault(row[0], _item(row))
    log: list[_Item] = []
    for part in parts:
        for seq, event_id, kind in _fetch(conn, _STRETCH_LOG, {**part, **bounds}):
            if skip_state_updates and kind == STATE_UPDATE_KIND:
                continue
            role = KIND_ROLES.get(kind, Role.OTHER)
            known = rows.get(seq)
            if known is None:
                if role in _TOOL_ROLES:
                    return None
                known = _Item(event_id, role, None, None, False)
            log.append(known)
    return log
