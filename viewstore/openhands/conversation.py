"""``open_conversation``: an OpenHands ``LocalConversation`` that persists into viewstore."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from openhands.sdk import LocalConversation
from openhands.sdk.agent.base import AgentBase
from openhands.sdk.workspace import LocalWorkspace

from viewstore.domain.errors import InvalidArgumentError
from viewstore.openhands import recall
from viewstore.openhands.file_store import ViewstoreFileStore
from viewstore.store import EventStore


def conversation_uuid(conversation_id: str | uuid.UUID | None) -> uuid.UUID:
    """The SDK names conversations by UUID; accept one, its hex or dashed text, or None (new)."""
    if conversation_id is None:
        return uuid.uuid4()
    if isinstance(conversation_id, uuid.UUID):
        return conversation_id
    try:
        return uuid.UUID(conversation_id)
    except (ValueError, TypeError, AttributeError) as e:
        raise InvalidArgumentError(
            f"an OpenHands conversation id must be a UUID, got {conversation_id!r}"
        ) from e


def open_conversation(
    store: EventStore,
    agent: AgentBase | None,
    workspace: str | Path | LocalWorkspace,
    conversation_id: str | uuid.UUID | None = None,
    **kwargs: Any,
) -> LocalConversation:
    """A ``LocalConversation`` persisting into ``store``: resumed if the store holds it (its
    base state and events), created otherwise. ``kwargs`` go to ``LocalConversation`` (for
    example ``visualizer=None``, ``callbacks=...``); ``file_store`` and ``persistence_dir``
    are this function's job and may not be given.

    A step whose event another process appended first raises ``ConcurrencyError``; open the
    conversation again to continue from what is stored.
    """
    for taken in ("file_store", "persistence_dir"):
        if taken in kwargs:
            raise InvalidArgumentError(f"open_conversation sets {taken} itself")
    cid = conversation_uuid(conversation_id)
    # The recall tool (docs/recall.md) reads this store for this conversation, if it is used.
    recall.bind(cid.hex, store)
    return LocalConversation(
        agent=agent,
        workspace=workspace,
        conversation_id=cid,
        file_store=ViewstoreFileStore(store, cid),
        **kwargs,
    )
