"""Whether a conversation's live view equals its resume view, without parsing its log.

The resume view is ``View.from_events`` over the log: the live view (every event applied in
turn), then the properties enforced against the whole log. So the two are equal exactly when
enforcement removes nothing, and enforcement reads only five facts of each event: id, role,
tool-call id, LLM response id and thinking flag. Those are columns already: every tool event
entered the view when it was appended, so the view rows (current and past) carry them, and
the kind of every other event is in the log. Two narrow scans, no payload read.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection

from viewstore.events import KIND_ROLES, Role
from viewstore.store.reads import _fetch
from viewstore.view.enforcement import enforce_properties


class _Item(NamedTuple):  # a ViewItem; a tuple: 40,000 of them are built per check
    id: str
    role: Role
    tool_call_id: str | None
    llm_response_id: str | None
    thinking: bool


_ROLES = {role.value: role for role in Role}
_VIEW_ROWS = (
    "SELECT seq, event_id, role, tool_call_id, llm_response_id, thinking, is_summary, left_seq "
    "FROM view_entries WHERE conversation_id = :c ORDER BY order_key"
)
_LOG = "SELECT seq, event_id, kind FROM events WHERE conversation_id = :c ORDER BY seq"


def live_equals_resume(conn: Connection, conversation_id: str) -> bool:
    params = {"c": conversation_id}
    entered: dict[int, _Item] = {}
    current: list[_Item] = []
    for seq, event_id, role, call, response, thinking, is_summary, left in _fetch(
        conn, _VIEW_ROWS, params
    ):
        item = _Item(event_id, _ROLES[role], call, response, bool(thinking))
        if not is_summary:
            entered[seq] = item
        if left is None:
            current.append(item)
    log: list[_Item] = []
    for seq, event_id, kind in _fetch(conn, _LOG, params):
        known = entered.get(seq)
        if known is None:
            role = KIND_ROLES.get(kind, Role.OTHER)
            if role is Role.ACTION or role is Role.OBSERVATION:
                return False  # a tool event that never entered the view: be safe
            known = _Item(event_id, role, None, None, False)
        log.append(known)
    _, rounds = enforce_properties(current, log)
    return not rounds
