"""Checks shared by the OpenHands SDK tests (plain functions, no SDK import)."""

from __future__ import annotations

from typing import Any

STATE_UPDATE = "ConversationStateUpdateEvent"


def assert_linear(store: Any, conversation_id: Any) -> None:
    """No sibling branches: each event's parent is the event before it that is a tree node
    (the SDK stamps state updates with a parent but never makes them one)."""
    previous = None
    for position, (event_id, kind, parent_id) in enumerate(store.log_index(conversation_id)):
        assert parent_id == previous, (position, event_id, kind, parent_id, previous)
        if kind != STATE_UPDATE:
            previous = event_id
