"""Read and write conversations in the folder layout the OpenHands SDK persists
(docs/semantics.md §9)::

    <conversation id hex>/
      base_state.json
      events/
        event-00000-<event id>.json   one event, no trailing newline
        ...
        .eventlog.lock
        .eventlog-len-<N>.marker

Reading follows the SDK (files in index order, the run 0, 1, 2, ...) with two deliberate
differences: an event file whose id is not hex (say ``cond-1``) is imported instead of being
silently dropped, and a gap in the run is an error instead of a silent truncation. A folder is
read completely before anything is appended, so a bad file means nothing of its conversation
is imported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viewstore.domain.errors import ImportFileError, InvalidEventError
from viewstore.domain.events import STATE_UPDATE_KIND, Event, parse_event

EVENT_FILE = re.compile(r"^event-(\d{5,})-(.+)\.json$")
EVENTS_DIR = "events"
BASE_STATE = "base_state.json"
LOCK_FILE = ".eventlog.lock"


def move_head(state: dict[str, Any], kind: str, event_id: str, source: str | None) -> None:
    """Move a base state's HEAD onto an event appended after it, in place, as the SDK's
    ``ConversationState.append_event`` and ``LocalConversation`` do: every event but a state
    update becomes the leaf (and HEAD is no longer empty), and a user message becomes the last
    user message (docs/openhands.md, "Base state"). A base state that trails its log is brought
    up to date by replaying this over the events it missed."""
    if kind == STATE_UPDATE_KIND:
        return
    state["leaf_event_id"] = event_id
    state["head_is_empty"] = False
    if kind == "MessageEvent" and source == "user":
        state["last_user_message_id"] = event_id


@dataclass(frozen=True)
class ConversationFolder:
    """A conversation folder to import; ``root`` is the folder named on the command line
    (itself, or the parent holding it): no file outside ``root`` is read."""

    conversation_id: str
    path: Path
    root: Path | None = None

    @property
    def events_dir(self) -> Path:
        return self.path / EVENTS_DIR

    def inside(self, path: Path) -> Path:
        """``path`` resolved, or ``ImportFileError`` if it leads outside ``root``.

        A symbolic link in an export or a downloaded archive must not make an import read
        files elsewhere on the machine (and store them in a conversation anyone may export).
        """
        root = (self.root or self.path).resolve()
        resolved = path.resolve()
        if not resolved.is_relative_to(root):
            raise ImportFileError(path, f"leads outside {root} (a symbolic link?): refused")
        return resolved


def is_conversation_folder(path: Path) -> bool:
    return (path / EVENTS_DIR).is_dir() or (path / BASE_STATE).is_file()


def find_conversation_folders(paths: Iterable[Path]) -> list[ConversationFolder]:
    """Each path is a conversation folder, or a parent folder holding conversation folders."""
    found: list[ConversationFolder] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ImportFileError(path, "not a folder")
        root = path.resolve()
        if is_conversation_folder(path):
            found.append(ConversationFolder(root.name, path, root))
            continue
        children = sorted(
            child for child in path.iterdir() if child.is_dir() and is_conversation_folder(child)
        )
        if not children:
            raise ImportFileError(
                path, f"no OpenHands conversation folder here (none has {EVENTS_DIR}/)"
            )
        found.extend(ConversationFolder(child.name, child, root) for child in children)
    return found


def event_files(folder: ConversationFolder) -> list[Path]:
    """The event files in index order; the indices must run 0..N-1 without a gap."""
    directory = folder.events_dir
    if not directory.is_dir():
        return []
    folder.inside(directory)
    indexed: dict[int, Path] = {}
    for entry in directory.iterdir():
        name = entry.name
        match = EVENT_FILE.match(name)
        if match is None:
            if name.startswith("event-") and name.endswith(".json"):
                raise ImportFileError(entry, "file name is not event-NNNNN-<event id>.json")
            continue  # .eventlog.lock, .eventlog-len-N.marker, anything else
        index = int(match.group(1))
        if index in indexed:
            raise ImportFileError(entry, f"a second file for index {index} ({indexed[index].name})")
        indexed[index] = entry
    for expected, index in enumerate(sorted(indexed)):
        if index != expected:
            raise ImportFileError(
                directory,
                f"event file index {expected} is missing (the next one is {indexed[index].name})",
            )
    return [indexed[i] for i in range(len(indexed))]


def read_events(folder: ConversationFolder, *, max_bytes: int | None = None) -> list[Event]:
    """Parse every event file of a folder; the first bad file raises ``ImportFileError``."""
    parsed: list[Event] = []
    for path in event_files(folder):
        match = EVENT_FILE.match(path.name)
        assert match is not None
        try:
            data = folder.inside(path).read_bytes()
        except OSError as error:
            raise ImportFileError(path, f"cannot read: {error.strerror or error}") from error
        try:
            event = parse_event(data, max_bytes=max_bytes)
        except InvalidEventError as error:
            raise ImportFileError(path, str(error)) from error
        if event.id != match.group(2):
            raise ImportFileError(
                path, f"the file name says event id {match.group(2)!r}, the event says {event.id!r}"
            )
        parsed.append(event)
    return parsed


def read_base_state(folder: ConversationFolder) -> str | None:
    """The folder's ``base_state.json`` as written (None if it has none); it must be a JSON
    object inside the folder named, else ``ImportFileError``."""
    path = folder.path / BASE_STATE
    if not path.is_file():
        return None
    try:
        text = folder.inside(path).read_text(encoding="utf-8")
        value = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ImportFileError(path, f"cannot read a JSON base state: {error}") from error
    if not isinstance(value, dict):
        raise ImportFileError(path, "the base state must be a JSON object")
    return text
