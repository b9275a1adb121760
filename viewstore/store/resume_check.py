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

from viewstore.events import KIND_ROLES, Role, parse_event
from viewstore.store import lineage, reads
from viewstore.store.reads import _fetch, bind_list
from viewstore.view import View
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
_FORGOTTEN_ACTION = (
    "SELECT 1 FROM view_entries WHERE conversation_id = :c AND left_seq IS NOT NULL "
    "AND role = 'action' AND llm_response_id IN ({}) LIMIT 1"
)
_BREAK_BEFORE = (
    "SELECT seq FROM events WHERE conversation_id = :c AND seq < :s "
    f"AND kind NOT IN ({_TOOL_KINDS}) ORDER BY seq DESC LIMIT 1"
)
_BREAK_AFTER = (
    "SELECT seq FROM events WHERE conversation_id = :c AND seq > :s "
    f"AND kind NOT IN ({_TOOL_KINDS}) ORDER BY seq LIMIT 1"
)
_STRETCH_LOG = (
    "SELECT seq, event_id, kind FROM events "
    "WHERE conversation_id = :c AND seq > :a AND seq < :b ORDER BY seq"
)
_STRETCH_ROWS = (
    f"SELECT {_FACTS} FROM view_entries WHERE conversation_id = :c "
    "AND NOT is_summary AND seq > :a AND seq < :b"
)


_END = 2**62  # past any seq


def _item(row: Any) -> _Item:
    _, event_id, role, call, response, thinking = row[:6]
    return _Item(event_id, _ROLES[role], call, response, bool(thinking))


def live_equals_resume(conn: Connection, conversation_id: str) -> bool:
    c = conversation_id
    if lineage.is_fork(reads.lineage_row(conn, c)):
        return _equal_by_replay(conn, c)
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
    if responses and _forgotten_action(conn, c, sorted(responses)):
        return False  # the view holds part of a batch: BatchAtomicity removes the rest
    log = _stretch(conn, c, min(tool_seqs), max(tool_seqs)) if tool_seqs else []
    if log is None:
        return False
    _, rounds = enforce_properties(current, log)
    return not rounds


def _equal_by_replay(conn: Connection, c: str) -> bool:
    """The whole comparison, for a fork: the forgotten rows this check relies on are kept
    only for the fork's own part (what left the view inside the shared prefix is recorded in
    its source, among rows the fork does not share), so a fork pays for its history here."""
    log = [parse_event(event.payload_json) for event in reads.read_events(conn, c)]
    current = [row[1] for row in _fetch(conn, _CURRENT, {"c": c})]
    return [event.id for event in View.from_events(log).events] == current


def _forgotten_action(conn: Connection, c: str, responses: list[str]) -> bool:
    listed, bound = bind_list("r", responses)
    return bool(_fetch(conn, _FORGOTTEN_ACTION.format(listed), {"c": c, **bound}))


def _stretch(conn: Connection, c: str, first: int, last: int) -> list[_Item] | None:
    """The log between the events that bound the loops of the view's tool events at seqs
    ``first`` to ``last``; None where a tool event there never had a view row (cannot
    happen by the projector's rules; the check then answers "differs", the safe side)."""
    before = _fetch(conn, _BREAK_BEFORE, {"c": c, "s": first})
    after = _fetch(conn, _BREAK_AFTER, {"c": c, "s": last})
    bounds = {"c": c, "a": before[0][0] if before else 0, "b": after[0][0] if after else _END}
    rows = {row[0]: _item(row) for row in _fetch(conn, _STRETCH_ROWS, bounds)}
    log: list[_Item] = []
    for seq, event_id, kind in _fetch(conn, _STRETCH_LOG, bounds):
        role = KIND_ROLES.get(kind, Role.OTHER)
        known = rows.get(seq)
        if known is None:
            if role in _TOOL_ROLES:
                return None
            known = _Item(event_id, role, None, None, False)
        log.append(known)
    return log
