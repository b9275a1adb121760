"""What the view logic needs to know of one view entry.

The rules only ask an entry for its id, its role and three tool-call fields, so they are written
against this protocol: :class:`viewstore.domain.events.Event` satisfies it, and so does the store's
lightweight record of a stored view row, which lets the projector rerun the rules after a
condensation without re-parsing payloads.
"""

from __future__ import annotations

from typing import Protocol

from viewstore.domain.kinds import Role


class ViewItem(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def role(self) -> Role: ...

    @property
    def tool_call_id(self) -> str | None: ...

    @property
    def llm_response_id(self) -> str | None: ...

    @property
    def thinking(self) -> bool: ...


def is_action(item: ViewItem) -> bool:
    return item.role is Role.ACTION


def is_observation(item: ViewItem) -> bool:
    return item.role is Role.OBSERVATION


def is_tool_event(item: ViewItem) -> bool:
    """Actions and observation-likes: the events a tool loop is made of."""
    return item.role is Role.ACTION or item.role is Role.OBSERVATION


def is_thinking_action(item: ViewItem) -> bool:
    return item.role is Role.ACTION and item.thinking
