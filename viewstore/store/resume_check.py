"""Whether a conversation's live view equals its resume view, without parsing its log.

The resume view is ``View.from_events`` over the log: the live view (every event applied in
turn), then the properties enforced against the whole log. So the two are equal exactly when
enforcement removes nothing, and enforcement reads only five facts of each event: id, role,
tool-call id, LLM response id and thinking flag. Those are columns already: every tool event
entered the view when it was appended, so the view rows (current and past) carry them, and
the kind of every other event is in the log. Two narrow scans, no payload read.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, select

from viewstore.events import KIND_ROLES, Role
from viewstore.store.schema import events, view_entries
from viewstore.view.enforcement import enforce_properties


@dataclass(frozen=True)
class _Item:
    id: str
    role: Role
    tool_call_id: str | None
    llm_response_id: str | None
    thinking: bool


def live_equals_resume(conn: Connection, conversation_id: str) -> bool:
    rows = conn.execute(
        select(
            view_entries.c.seq,
            view_entries.c.event_id,
            view_entries.c.role,
            view_entries.c.tool_call_id,
            view_entries.c.llm_response_id,
            view_entries.c.thinking,
            view_entries.c.is_summary,
            view_entries.c.left_seq,
        )
        .where(view_entries.c.conversation_id == conversation_id)
        .order_by(view_entries.c.order_key)
    ).all()
    entered: dict[int, _Item] = {}
    current: list[_Item] = []
    for row in rows:
        item = _Item(
            row.event_id, Role(row.role), row.tool_call_id, row.llm_response_id, row.thinking
        )
        if not row.is_summary:
            entered[row.seq] = item
        if row.left_seq is None:
            current.append(item)
    log: list[_Item] = []
    for seq, event_id, kind in conn.execute(
        select(events.c.seq, events.c.event_id, events.c.kind)
        .where(events.c.conversation_id == conversation_id)
        .order_by(events.c.seq)
    ):
        role = KIND_ROLES.get(kind, Role.OTHER)
        known = entered.get(seq)
        if known is None:
            if role in (Role.ACTION, Role.OBSERVATION):
                return False  # a tool event that never entered the view: be safe
            known = _Item(event_id, role, None, None, False)
        log.append(known)
    _, rounds = enforce_properties(current, log)
    return not rounds
