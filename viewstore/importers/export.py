"""Write a conversation back as the folder the OpenHands SDK persists, and nowhere else.

``write_conversation_folder(out, id, events)`` writes ``out/<id>/`` only: the id must be one
plain folder name (``viewstore.store.inputs`` says which ids are; a store may still hold ``.``
or ``..`` from before that rule, and exporting those is refused), a folder or file on the way
that is a symbolic link is refused rather than followed, and every file is created without
following a link planted in its place. ``--force`` deletes only event files and dot files
directly inside ``out/<id>/events/``.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from viewstore.domain.errors import ImportFileError, InvalidArgumentError
from viewstore.domain.events import STATE_UPDATE_KIND
from viewstore.importers.openhands import (
    BASE_STATE,
    EVENT_FILE,
    EVENTS_DIR,
    LOCK_FILE,
    move_head,
)
from viewstore.store import StoredEvent, new_conversation_key

_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # Windows has no links to follow here


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
    """A base state kept by viewstore.openhands, with its HEAD moved onto the events it
    trails (a writer that died between an event and its base state, or a base state the
    file store did not rewrite because the log implies it)."""
    state: dict[str, Any] = json.loads(payload)
    for event in events[at_version:]:
        move_head(state, event.kind, event.event_id, event.payload.get("source"))
    return state


#: The agent server's record of a conversation, beside its base state (docs/agent-servers.md).
META = "meta.json"


def server_meta(
    conversation_id: str, stored: str | None, base_state: dict[str, Any] | None
) -> str | None:
    """The ``meta.json`` a plain ``openhands-agent-server`` needs to list and run the
    conversation: the one a store-backed server kept, else the least it accepts (the id and
    the base state's workspace; the agent is in the base state). None without either."""
    if stored is not None:
        return stored
    workspace = None if base_state is None else base_state.get("workspace")
    if not isinstance(workspace, dict) or not isinstance(workspace.get("working_dir"), str):
        return None
    return json.dumps({"id": uuid_text(conversation_id), "workspace": workspace})


def write_conversation_folder(
    out: Path,
    conversation_id: str,
    events: Sequence[StoredEvent],
    *,
    overwrite: bool = False,
    base_state: dict[str, Any] | None = None,
    meta: str | None = None,
) -> Path:
    """Write ``<out>/<conversation id>/`` in the SDK layout; event files hold the stored JSON
    text byte for byte. ``base_state`` is written as given, else a minimal one; ``meta``, the
    agent server's ``meta.json``, if given. Refuses to write into a non-empty folder unless
    ``overwrite``."""
    try:
        new_conversation_key(conversation_id)
    except InvalidArgumentError as error:
        raise ImportFileError(
            out, f"cannot export as a folder: {error} (export it with --jsonl)"
        ) from error
    root = out.resolve()  # OUT itself may be a link: the folder named is where it leads
    target = root / conversation_id
    events_dir = target / EVENTS_DIR
    for folder in (target, events_dir):
        _refuse_link(folder)
    if target.exists() and any(target.iterdir()):
        if not overwrite:
            raise ImportFileError(
                out / conversation_id, "already exists and is not empty (use --force)"
            )
        _remove_stale(events_dir)
    events_dir.mkdir(parents=True, exist_ok=True)
    if events_dir.resolve() != events_dir:  # a link swapped in meanwhile
        raise ImportFileError(events_dir, f"leads outside {root}: refused")
    for index, event in enumerate(events):
        _write_text(events_dir / event_file_name(index, event.event_id), event.payload_json)
    _create_empty(events_dir / LOCK_FILE)
    _create_empty(events_dir / f".eventlog-len-{len(events)}.marker")
    state = base_state if base_state is not None else minimal_base_state(conversation_id, events)
    _write_text(target / BASE_STATE, json.dumps(state, ensure_ascii=False))
    if meta is not None:
        _write_text(target / META, meta)
    return out / conversation_id


def _refuse_link(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise ImportFileError(path, "is a symbolic link: refused (export writes only inside OUT)")
    if not stat.S_ISDIR(mode):
        raise ImportFileError(path, "exists and is not a folder")


def _remove_stale(events_dir: Path) -> None:
    """Event files and dot files of an earlier export; a link is removed, never followed."""
    if not events_dir.is_dir():
        return
    with os.scandir(events_dir) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                continue
            if EVENT_FILE.match(entry.name) or entry.name.startswith("."):
                os.unlink(entry.path)


def _write_text(path: Path, text: str) -> None:
    """Write through a temporary file replaced into place: a reader never sees half a file,
    and a link planted at either name is replaced, not written through."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o644)
    with open(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _create_empty(path: Path) -> None:
    if path.is_symlink():
        path.unlink()
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | _NO_FOLLOW, 0o644))
