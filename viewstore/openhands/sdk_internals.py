"""Everything viewstore.openhands relies on that the OpenHands SDK does not promise.

Pinned to openhands-sdk 1.57 (``viewstore[openhands]``) and tested against it by
tests/openhands/test_sdk_internals.py. Keep every such dependency in this module:

- the persistence layout of ``EventLog``: the ``events`` folder, the event file name pattern
  and the regular expression its scan accepts, the ``base_state.json`` name, the lock file
  name and the length-marker pattern (``openhands.sdk.conversation.persistence_const`` and
  ``openhands.sdk.conversation.event_store``);
- how ``ConversationState.append_event`` moves HEAD: every event except a
  ``ConversationStateUpdateEvent`` becomes ``leaf_event_id`` (and clears ``head_is_empty``),
  and ``LocalConversation`` records a user ``MessageEvent`` as ``last_user_message_id``;
  ``catch_up`` replays that onto a base state that missed the last events;
- importing ``openhands.sdk`` sets the root logger to INFO (``LOG_LEVEL``), which would make
  SQLAlchemy log every statement the store runs: its loggers are held at WARNING below,
  unless the application set their level itself.
"""

from __future__ import annotations

import json
import logging
import re
from importlib.metadata import version
from typing import Any

from openhands.sdk.conversation import event_store as _event_store
from openhands.sdk.conversation import persistence_const as _const

SUPPORTED = "1.57"
SDK_VERSION = version("openhands-sdk")
if not SDK_VERSION.startswith(SUPPORTED + "."):  # pragma: no cover - the extra pins it
    raise ImportError(
        f"viewstore.openhands supports openhands-sdk {SUPPORTED}.x, found {SDK_VERSION}"
    )

BASE_STATE: str = _const.BASE_STATE
EVENTS_DIR: str = _const.EVENTS_DIR
EVENT_NAME_RE: re.Pattern[str] = _const.EVENT_NAME_RE
EVENT_FILE_PATTERN: str = _const.EVENT_FILE_PATTERN
LOCK_FILE_NAME: str = _event_store.LOCK_FILE_NAME
MARKER_RE = re.compile(
    "^" + re.escape(_event_store.LENGTH_MARKER_PATTERN).replace(r"\{length\}", r"(?P<n>\d+)") + "$"
)

STATE_UPDATE_KIND = "ConversationStateUpdateEvent"

for _name in ("sqlalchemy", "sqlalchemy.engine", "sqlalchemy.pool"):
    _logger = logging.getLogger(_name)
    if _logger.level in (logging.NOTSET, logging.getLogger().level):  # the SDK's doing
        _logger.setLevel(logging.WARNING)


def event_file_name(index: int, event_id: str) -> str:
    return EVENT_FILE_PATTERN.format(idx=index, event_id=event_id)


def catch_up(base_state: str, later_events: list[dict[str, Any]]) -> str:
    """The base state as ``ConversationState`` would have saved it after ``later_events``.

    The SDK writes an event, then its base state with the new HEAD; a process that dies in
    between leaves a base state whose HEAD misses the event, and a resume would then drop it
    from the active branch and fork the next event off the old HEAD. Replaying the HEAD moves
    closes that window.
    """
    state: dict[str, Any] = json.loads(base_state)
    for event in later_events:
        if event.get("kind") == STATE_UPDATE_KIND:
            continue
        state["leaf_event_id"] = event["id"]
        state["head_is_empty"] = False
        if event.get("kind") == "MessageEvent" and event.get("source") == "user":
            state["last_user_message_id"] = event["id"]
    return json.dumps(state, ensure_ascii=False)
