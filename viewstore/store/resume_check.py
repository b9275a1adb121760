"""Whether a conversation's live view equals its resume view, at the cost of the view.

The resume view is ``View.from_events`` over the log: the live view (every event applied in
turn), then the properties enforced against the whole log (docs/semantics.md §5, §7). So the
two are equal exactly when enforcement removes nothing. Enforcement reads five narrow facts of
each event (id, role, tool-call id, LLM response id, thinking flag), and of the log it needs
only what touches the tool events of the view:

- ObservationUniqueness and ToolCallMatching read the view alone;
- BatchAtomicity compares, for each LLM response of a view action, the view's actions of that
  response with the log's. Every tool event enters the live view when it is appended (the
  projector never drops one on entry), so a log action missing from the view is a *forgotten*
  view row: one query for forgotten actions of those responses settles it;
- ToolLoopAtomicity reads the tool loops of the log. A loop never spans an event that is not
  a tool event, so every loop holding a view event lies between the last such event before the
  view's first tool event and the first after its last: only that stretch of the log is read.

A condensed conversation whose view keeps its recent steps thus reads its view, one probe per
end of the stretch and the stretch itself, not its 20,000-event history. The answer is the same
as enforcing against the whole log (tests/store/test_live_equals_resume.py compares both on
every reference vector and on random streams).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import Connection

from viewstore.events import KIND_ROLES, Role
from viewstore.store import lineage, reads
from viewstore.store.reads import _fetch, bind_list
from viewstore.view.enforcement import enforce_properties


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
_FACTS = "seq, event_id, role, tool_call_id, llm_response_id, thinking"
_CURRENT = (
    f"SELECT {_FACTS}, is_summary FROM view_entries "
    "WHERE conversation_id = :c AND left_seq IS NULL ORDER BY order_key"
)
# Each query reads one conversation's part of a lineage (a fork's sources hold its shared
# prefix, ``viewstore.store.lineage``): seqs, or for left rows the seqs they left at, in
# ``:lo < x <= :hi``. A conversation that is not a fork is one part, from 0 to the end.
_FORGOTTEN_ACTION = (
    "SELECT 1 FROM view_entries WHERE conversation_id = :c AND left_seq > :lo "
    "AND left_seq <= :hi AND role = 'action' AND llm_response_id IN ({}) LIMIT 1"
)
_BREAK_BEFORE = (
    "SELECT seq FROM events WHERE conversation_id = :c AND seq < :s AND seq > :lo "
    f"AND seq <= :hi AND kind NOT IN ({_TOOL_KINDS}) ORDER BY seq DESC LIMIT 1"
)
_BREAK_AFTER = (
    "SELECT seq FROM events WHERE conversation_id = :c AND seq > :s AND seq > :lo "
    f"AND seq <= :hi AND kind NOT IN ({_TOOL_KINDS}) ORDER BY seq LIMIT 1"
)
_STRETCH_LOG = (
    "SELECT seq, event_id, kind FROM events WHERE conversation_id = :c "
    "AND seq > :a AND seq < :b AND seq > :lo AND seq <= :hi ORDER BY seq"
)
_STRETCH_ROWS = (
    f"SELECT {_FACTS} FROM view_entries WHERE conversation_id = :c "
    "AND NOT is_summary AND seq > :a AND seq < :b AND seq > :lo AND seq <= :hi"
)


_END = 2**62  # past any seq


def _item(row: Any) -> _Item:
    _, event_id, role, call, response, thinking = row[:6]
    return _Item(event_id, _ROLES[role], call, response, bool(thinking))


def live_equals_resume(conn: Connection, conversation_id: str) -> bool:
    c = conversation_id
    parts = [
        {"c": segment.conversation_id, "lo": segment.after, "hi": segment.upto or _END}
        for segment in lineage.segments(conn, reads.lineage_row(conn, c))
    ]
    current: list[_Item] = []
    tool_seqs: list[int] = []
    responses: set[str] = set()
    for row in _fetch(conn, _CURRENT, {"c": c}):
        item = _item(row)
        current.append(item)
        if not row[6] and item.role in _TOOL_ROLES:
            tool_seqs.append(row[0])
            if item.role is Role.ACTION and item.llm_response_id is not None:
                responses.add(item.llm_response_id)
    if responses and _forgotten_action(conn, parts, sorted(responses)):
        return False  # the view holds part of a batch: BatchAtomicity removes the rest
    log = _stretch(conn, parts, min(tool_seqs), max(tool_seqs)) if tool_seqs else []
    if log is None:
        return False
    _, rounds = enforce_properties(current, log)
    return not rounds


Part = dict[str, Any]


def _forgotten_action(conn: Connection, parts: list[Part], responses: list[str]) -> bool:
    """Whether an action of these responses left the view: a row leaving at seq ``s`` is
    recorded by the conversation whose part of the lineage holds ``s``."""
    listed, bound = bind_list("r", responses)
    sql = _FORGOTTEN_ACTION.format(listed)
    return any(_fetch(conn, sql, {**part, **bound}) for part in parts)


def _first(conn: Connection, sql: str, parts: list[Part], seq: int) -> int | None:
    for part in parts:
        found = _fetch(conn, sql, {**part, "s": seq})
        if found:
            return int(found[0][0])
    return None


def _stretch(conn: Connection, parts: list[Part], first: int, last: int) -> list[_Item] | None:
    """The log between the events that bound the loops of the view's tool events at seqs
    ``first`` to ``last``; None where a tool event there never had a view row (cannot
    happen by the projector's rules; the check then answers "differs", the safe side).
    A row for the event at seq ``s`` was written by the conversation whose part holds ``s``."""
    before = _first(conn, _BREAK_BEFORE, list(reversed(parts)), first)
    after = _first(conn, _BREAK_AFTER, parts, last)
    bounds = {"a": before or 0, "b": after or _END}
    log: list[_Item] = []
    for part in parts:
        scope = {**part, **bounds}
        rows = {row[0]: _item(row) for row in _fetch(conn, _STRETCH_ROWS, scope)}
        for seq, event_id, kind in _fetch(conn, _STRETCH_LOG, scope):
            role = KIND_ROLES.get(kind, Role.OTHER)
            known = rows.get(seq)
            if known is None:
                if role in _TOOL_ROLES:
                    return None
                known = _Item(event_id, role, None, None, False)
            log.append(known)
    return log
