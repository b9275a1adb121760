"""Read and write conversations in the folder layout the OpenHands SDK persists
(SEMANTICS.md section 9)::

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
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viewstore.errors import InvalidEventError
from viewstore.events import STATE_UPDATE_KIND, Event, parse_event
from viewstore.store.records import StoredEvent

EVENT_FILE = re.compile(r"^event-(\d{5,})-(.+)\.json$")
EVENTS_DIR = "events"
BASE_STATE = "base_state.json"
LOCK_FILE = ".eventlog.lock"


class ImportFileError(Exception):
    """A file of a conversation folder cannot be imported; names the file."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class ConversationFolder:
    conversation_id: str
    path: Path

    @property
    def events_dir(self) -> Path:
        return self.path / EVENTS_DIR


def is_conversation_folder(path: Path) -> bool:
    return (path / EVENTS_DIR).is_dir() or (path / BASE_STATE).is_file()


def find_conversation_folders(paths: Iterable[Path]) -> list[ConversationFolder]:
    """Each path is a conversation folder, or a parent folder holding conversation folders."""
    found: list[ConversationFolder] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise ImportFileError(path, "not a folder")
        if is_conversation_folder(path):
            found.append(ConversationFolder(path.resolve().name, path))
            continue
        children = sorted(
            child for child in path.iterdir() if child.is_dir() and is_conversation_folder(child)
        )
        if not children:
            raise ImportFileError(
                path, f"no OpenHands conversation folder here (none has {EVENTS_DIR}/)"
            )
        found.extend(ConversationFolder(child.name, child) for child in children)
    return found


def event_files(folder: ConversationFolder) -> list[Path]:
    """The event files in index order; the indices must run 0..N-1 without a gap."""
    directory = folder.events_dir
    if not directory.is_dir():
        return []
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
            data = path.read_bytes()
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
    object, else ``ImportFileError``."""
    path = folder.path / BASE_STATE
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
        value = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ImportFileError(path, f"cannot read a JSON base state: {error}") from error
    if not isinstance(value, dict):
        raise ImportFileError(path, "the base state must be a JSON object")
    return text


# ------------------------------------------------------------------------------- writing


def uuid_text(conversation_id: str) -> str:
    """The id as OpenHands writes it in base_state.json: a dashed UUID when it is one."""
    try:
        return str(uuid.UUID(hex=conversation_id))
    except ValueError:
        return conversation_id


def minimal_base_state(conversation_id: str, events: Sequence[StoredEvent]) -> dict[str, Any]:
    """What viewstore knows of ``base_state.json``: id and HEAD (the SDK's own file also holds
    the agent, workspace and stats, which are not events and are not stored)."""
    leaf = next((e.event_id for e in reversed(events) if e.kind != STATE_UPDATE_KIND), None)
    state: dict[str, Any] = {"id": uuid_text(conversation_id)}
    if leaf is not None:
        state["leaf_event_id"] = leaf
    state["head_is_empty"] = leaf is None
    return state


def event_file_name(index: int, event_id: str) -> str:
    return f"event-{index:05d}-{event_id}.json"


def stored_base_state(
    conversation_id: str, events: Sequence[StoredEvent], payload: str, at_version: int
) -> dict[str, Any]:
    """A base state kept by viewstore.openhands, with its HEAD moved onto the events its
    writer had not seen (a writer that died between an event and its base state)."""
    state: dict[str, Any] = json.loads(payload)
    if at_version < len(events):
        head = minimal_base_state(conversation_id, events)
        state["leaf_event_id"] = head.get("leaf_event_id")
        state["head_is_empty"] = head["head_is_empty"]
    return state


def write_conversation_folder(
    out: Path,
    conversation_id: str,
    events: Sequence[StoredEvent],
    *,
    overwrite: bool = False,
    base_state: dict[str, Any] | None = None,
) -> Path:
    """Write ``<out>/<conversation id>/`` in the SDK layout; event files hold the stored JSON
    text byte for byte. ``base_state`` is written as given, else a minimal one. Refuses to
    write into a non-empty folder unless ``overwrite``."""
    target = out / conversation_id
    events_dir = target / EVENTS_DIR
    if target.exists() and any(target.iterdir()):
        if not overwrite:
            raise ImportFileError(target, "already exists and is not empty (use --force)")
        for stale in events_dir.glob("*") if events_dir.is_dir() else []:
            if stale.is_file() and (EVENT_FILE.match(stale.name) or stale.name.startswith(".")):
                stale.unlink()
    events_dir.mkdir(parents=True, exist_ok=True)
    for index, event in enumerate(events):
        _write_text(events_dir / event_file_name(index, event.event_id), event.payload_json)
    (events_dir / LOCK_FILE).touch()
    (events_dir / f".eventlog-len-{len(events)}.marker").touch()
    state = base_state if base_state is not None else minimal_base_state(conversation_id, events)
    _write_text(target / BASE_STATE, json.dumps(state, ensure_ascii=False))
    return target


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    os.replace(tmp, path)
