"""Everything viewstore.openhands relies on that the OpenHands SDK does not promise.

Checked against openhands-sdk 1.57 and 1.58 (``SUPPORTED``; ``viewstore[openhands]`` allows
exactly those) by tests/openhands/test_sdk_internals.py, run once per release in CI. Keep
every such dependency in this module:

- the persistence layout of ``EventLog``: the ``events`` folder, the event file name pattern
  and the regular expression its scan accepts, the ``base_state.json`` name, the lock file
  name and the length-marker pattern (``openhands.sdk.conversation.persistence_const`` and
  ``openhands.sdk.conversation.event_store``);
- how ``ConversationState.append_event`` moves HEAD: every event except a
  ``ConversationStateUpdateEvent`` becomes ``leaf_event_id`` (and clears ``head_is_empty``),
  and ``LocalConversation`` records a user ``MessageEvent`` as ``last_user_message_id``
  (``viewstore.importers.openhands.move_head``, pure, so that export applies it too);
  ``catch_up`` replays that onto a base state that missed the last events;
- resuming at the cost of the view: ``ConversationState.create`` calls ``rebuild_view()`` on a
  resumed state, which parses the whole active branch. ``install_resume_hook`` wraps that
  method (for every state, once) so that a state persisted by viewstore may instead receive
  a prepared view: it sets the private ``_view`` and ``_view_branch_leaf`` exactly as
  ``rebuild_view`` does, after reading ``_fs``, ``_events`` and ``_resolve_active_leaf()``.
  ``StoredIndicesView`` is an SDK ``View`` that answers ``manipulation_indices`` from the
  stored rows until its events change;
- listing a log at the cost of its ids: ``EventLog.__init__`` calls ``_scan_and_build_index``,
  which lists every event file name and parses each. ``install_scan_hook`` wraps it so a
  viewstore-backed log fills ``_id_to_idx`` and ``_idx_to_id`` (and clears ``_event_cache``)
  straight from the stored ids, as the scan would from their file names; the ids a name must
  carry are those of the ``event_id`` group of ``EVENT_NAME_RE``;
- importing ``openhands.sdk`` sets the root logger to INFO (``LOG_LEVEL``), which would make
  SQLAlchemy log every statement the store runs: its loggers are held at WARNING below,
  unless the application set their level itself.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any

from openhands.sdk.context.view import View
from openhands.sdk.context.view.manipulation_indices import ManipulationIndices
from openhands.sdk.conversation import event_store as _event_store
from openhands.sdk.conversation import persistence_const as _const
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.event.base import Event as SdkEvent
from pydantic import PrivateAttr

from viewstore.importers.openhands import move_head

#: The SDK releases this module was checked against, each by the whole of tests/openhands
#: (CI runs it once per release: .ci/run); the extra's range in pyproject.toml is theirs.
SUPPORTED = ("1.57", "1.58")
SUPPORTED_RANGE = ">=1.57,<1.59"
SDK_VERSION = version("openhands-sdk")
if SDK_VERSION.rpartition(".")[0] not in SUPPORTED:  # pragma: no cover - the extra pins it
    raise ImportError(
        f"viewstore.openhands supports openhands-sdk {SUPPORTED_RANGE} "
        f"({', '.join(v + '.x' for v in SUPPORTED)}), found {SDK_VERSION}: "
        f"pip install 'openhands-sdk{SUPPORTED_RANGE}'"
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

# The ids the scan accepts, one per line: a whole log is checked by one match, not 20,000.
_ID_PATTERN = re.search(r"\(\?P<event_id>(.+?)\)\\\.json", EVENT_NAME_RE.pattern)
if _ID_PATTERN is None:  # pragma: no cover - the pinned SDK has the group
    raise ImportError("openhands-sdk's EVENT_NAME_RE has no event_id group")
_ID_LINES = re.compile(rf"(?:{_ID_PATTERN.group(1)}\n)*")


def scannable(ids: Sequence[str]) -> bool:
    """Whether the SDK's scan would accept every id's file name (it stops at the first it
    would not: then let it scan)."""
    return _ID_LINES.fullmatch("".join(f"{event_id}\n" for event_id in ids)) is not None


for _name in ("sqlalchemy", "sqlalchemy.engine", "sqlalchemy.pool"):
    _logger = logging.getLogger(_name)
    if _logger.level in (logging.NOTSET, logging.getLogger().level):  # the SDK's doing
        _logger.setLevel(logging.WARNING)


def event_file_name(index: int, event_id: str) -> str:
    return EVENT_FILE_PATTERN.format(idx=index, event_id=event_id)


def catch_up(base_state: str, later_events: list[dict[str, Any]]) -> str:
    """The base state as ``ConversationState`` would have saved it after ``later_events``.

    The SDK writes an event, then its base state with the new HEAD. A base state that trails
    its log (its writer died in between, or the file store left it as the log implies it)
    is brought up to date by replaying the HEAD moves (``move_head``); otherwise a resume would
    drop the missed events from the active branch and fork the next event off the old HEAD.
    """
    state: dict[str, Any] = json.loads(base_state)
    for event in later_events:
        move_head(state, str(event.get("kind")), str(event["id"]), event.get("source"))
    return json.dumps(state, ensure_ascii=False)


class StoredIndicesView(View):
    """An SDK ``View`` built from stored rows: its manipulation indices are the stored ones
    for as long as its event list is the one it was built with, unchanged in length (an
    append grows the list, a condensation replaces it); then the SDK computes them."""

    _stored_indices: frozenset[int] = PrivateAttr(default=frozenset())
    _stored_events: Any = PrivateAttr(default=None)
    _stored_length: int = PrivateAttr(default=-1)

    @property
    def manipulation_indices(self) -> ManipulationIndices:
        if self.events is self._stored_events and len(self.events) == self._stored_length:
            return ManipulationIndices(self._stored_indices)
        return super().manipulation_indices


def stored_view(payloads: Sequence[str], indices: Sequence[int], unhandled: bool) -> View:
    """The SDK view of stored view payloads (summaries included), with stored indices."""
    view = StoredIndicesView(
        events=[SdkEvent.model_validate_json(payload) for payload in payloads],
        unhandled_condensation_request=unhandled,
    )
    view._stored_indices = frozenset(indices)
    view._stored_events = view.events
    view._stored_length = len(view.events)
    return view


#: Given a state's file store, its HEAD and its log length: a view to resume with, or None
#: to let the SDK rebuild it.
ResumeProvider = Callable[[Any, str | None, int], View | None]


def install_resume_hook(provider: ResumeProvider) -> None:
    """Wrap ``ConversationState.rebuild_view`` once so ``provider`` may serve the view."""
    original = ConversationState.rebuild_view
    if getattr(original, "_viewstore_hook", False):
        return

    def rebuild_view(self: ConversationState) -> None:
        with self._view_lock:
            leaf = self._resolve_active_leaf()
            view = provider(self._fs, leaf, len(self._events))
            if view is None:
                original(self)
                return
            self._view = view
            self._view_branch_leaf = leaf

    rebuild_view._viewstore_hook = True  # type: ignore[attr-defined]
    ConversationState.rebuild_view = rebuild_view  # type: ignore[method-assign]


#: Given an EventLog's file store and folder: the ids of its events in order, or None to let
#: the SDK list and parse the file names itself.
IndexProvider = Callable[[Any, str], Sequence[str] | None]


def install_scan_hook(provider: IndexProvider) -> None:
    """Wrap ``EventLog._scan_and_build_index`` once so ``provider`` may give the ids."""
    log_class = _event_store.EventLog
    original = log_class._scan_and_build_index
    if getattr(original, "_viewstore_hook", False):
        return

    def scan(self: Any) -> int:
        ids = provider(self._fs, self._dir)
        if ids is None:
            result: int = original(self)
            return result
        self._id_to_idx.clear()
        self._idx_to_id.clear()
        self._event_cache.clear()
        self._idx_to_id.update(enumerate(ids))
        self._id_to_idx.update(zip(ids, range(len(ids)), strict=True))
        return len(ids)

    scan._viewstore_hook = True  # type: ignore[attr-defined]
    log_class._scan_and_build_index = scan  # type: ignore[method-assign]
