"""``ViewstoreFileStore``: the OpenHands SDK's ``FileStore``, over an ``EventStore``.

The SDK persists a conversation through a ``FileStore`` scoped to the conversation's folder:
``base_state.json``, ``events/event-NNNNN-<id>.json`` (one per event, NNNNN its index), a lock
file and a length marker. Here each of those maps onto the store:

- an event file write is ``append(..., expected_version=NNNNN)``: the index *is* the version
  the event lands at, so a second process that appends to the same conversation gets
  ``ConcurrencyError`` instead of silently forking the conversation tree;
- listing ``events/`` is one query of ids; reading event files fetches their payloads in a few
  growing windows (one query serves many files, never one query per file);
- ``base_state.json`` is a row of its own, refused when written by a process that fell behind
  (``EventStore.save_base_state``), and caught up on read when it trails the log
  (``sdk_internals.catch_up``). The SDK rewrites it after every event only to move HEAD onto
  that event, which the log already says: a base state equal to the stored one with HEAD
  moved over the events since is not written (at most ``MAX_LAG`` events behind), so a step
  is one write, the event's (docs/openhands.md, "Base state");
- the lock file is a lock between the threads that share this file store (and so the SDK's
  ``EventLog`` over it). Other processes, and other file stores of the conversation, need
  none: each event is appended at the version its file name gives, so of two writers the
  second is refused (``ConcurrencyError``) whether or not they take turns;
- the length marker tells ``EventLog`` whether another process appended since it last looked.
  Here the answer is always "no": if one did, the append's expected version catches it (a
  marker would instead make the SDK resynchronise and write on top, a sibling branch).
"""

from __future__ import annotations

import builtins
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from openhands.sdk.context.view import View
from openhands.sdk.io import FileStore

from viewstore.domain.errors import ConversationNotFoundError, InvalidArgumentError
from viewstore.domain.events import parse_event
from viewstore.domain.view.branch import branch_positions
from viewstore.importers.openhands import move_head
from viewstore.openhands import sdk_internals as sdk
from viewstore.store import EventStore, conversation_key

_FIRST_WINDOW = 256  # events per read query at first; doubles on each later miss
_MAX_WINDOW = 65_536
#: Events a base state left unwritten may trail its log by: a read replays them.
MAX_LAG = 64


class ViewstoreFileStore(FileStore):
    """One conversation's SDK files, kept in ``store`` (pass as ``file_store=``)."""

    def __init__(self, store: EventStore, conversation_id: str | uuid.UUID) -> None:
        self.store = store
        self.conversation_id = conversation_key(conversation_id)
        self._seen = 0  # events the SDK's EventLog has listed or written through us
        self._texts: dict[int, tuple[str, str]] = {}  # index -> (event id, JSON) fetched
        self._window = _FIRST_WINDOW
        self._index: list[tuple[str, str, str | None]] | None = None  # as last listed
        # The stored base state with HEAD moved over the events written since, and the
        # version it was stored at; None when unknown (nothing written by us since a listing).
        self._implied: dict[str, Any] | None = None
        self._stored_at = 0
        self._lock = threading.Lock()

    @property
    def seen_version(self) -> int:
        """How many events the SDK has listed or written through this file store."""
        return self._seen

    # -- FileStore ----------------------------------------------------------------------

    def write(self, path: str, contents: str | bytes) -> None:
        name = _relative(path)
        if name == sdk.BASE_STATE:
            self._write_base_state(contents)
            return
        folder, _, file = name.rpartition("/")
        if folder == sdk.EVENTS_DIR and sdk.MARKER_RE.match(file):
            return  # see the module docstring
        match = sdk.EVENT_NAME_RE.match(file) if folder == sdk.EVENTS_DIR else None
        if match is None:
            raise InvalidArgumentError(
                f"viewstore keeps only {sdk.BASE_STATE} and event files, not {path!r}"
            )
        index = int(match.group("idx"))
        # Checked before the append, not after it: an append is committed when it returns,
        # and the SDK indexes the file under the id in its name.
        event = parse_event(contents, max_bytes=self.store.max_event_bytes)
        if event.id != match.group("event_id"):
            raise InvalidArgumentError(f"event file {path!r} holds event {event.id!r}")
        self.store.append(self.conversation_id, event, expected_version=index)
        self._seen = max(self._seen, index + 1)
        if self._implied is not None:
            move_head(self._implied, event.kind, event.id, event.source)

    def read(self, path: str) -> str:
        name = _relative(path)
        if name == sdk.BASE_STATE:
            return self._read_base_state(path)
        folder, _, file = name.rpartition("/")
        match = sdk.EVENT_NAME_RE.match(file) if folder == sdk.EVENTS_DIR else None
        if match is None:
            raise FileNotFoundError(path)
        index = int(match.group("idx"))
        if index not in self._texts:
            self._fetch_around(index)
        # Handed out once: the SDK's EventLog keeps the parsed event from then on.
        event_id, text = self._texts.pop(index, ("", ""))
        if event_id != match.group("event_id"):
            raise FileNotFoundError(path)
        return text

    def list(self, path: str) -> list[str]:
        name = _relative(path)
        if name == sdk.EVENTS_DIR:
            ids = self._list_ids()
            prefix = path.rstrip("/")
            return [f"{prefix}/{sdk.event_file_name(i, e)}" for i, e in enumerate(ids)]
        if name == "":
            found = []
            if self.store.base_state(self.conversation_id) is not None:
                found.append(sdk.BASE_STATE)
            if self.store.log_index(self.conversation_id):
                found.append(f"{sdk.EVENTS_DIR}/")
            return found
        return []

    def delete(self, path: str) -> None:
        folder, _, file = _relative(path).rpartition("/")
        if folder == sdk.EVENTS_DIR and sdk.MARKER_RE.match(file):
            return
        raise InvalidArgumentError(f"the viewstore log is append-only: cannot delete {path!r}")

    def exists(self, path: str) -> bool:
        name = _relative(path)
        if name == sdk.BASE_STATE:
            return self.store.base_state(self.conversation_id) is not None
        if name in ("", sdk.EVENTS_DIR):
            return bool(self.store.log_index(self.conversation_id))
        folder, _, file = name.rpartition("/")
        if folder != sdk.EVENTS_DIR:
            return False
        marker = sdk.MARKER_RE.match(file)
        if marker is not None:
            return int(marker.group("n")) == self._seen  # see the module docstring
        return file == sdk.LOCK_FILE_NAME or self._event_file_exists(file)

    def get_absolute_path(self, path: str) -> str:
        # Not a file system path: there is no file. The SDK itself never asks.
        return f"viewstore:{self.conversation_id}/{_relative(path)}"

    @contextmanager
    def lock(self, path: str, timeout: float = 30.0) -> Iterator[None]:
        if not self._lock.acquire(timeout=max(timeout, 0.0)):
            raise TimeoutError(f"lock {path!r} of {self.conversation_id!r} not acquired in time")
        try:
            yield
        finally:
            self._lock.release()

    # -- resume at the cost of the view ---------------------------------------------------

    def resume_view(self, leaf: str | None, length: int) -> View | None:
        """The view for the SDK to resume with, from the stored rows, when the SDK would
        compute it from this log: the log is one linear branch ending at ``leaf`` and
        unchanged since it was listed. Otherwise None (the SDK rebuilds it)."""
        index = self._index
        if not index or len(index) != length or leaf is None:
            return None
        skip = _branch_is_the_log(index, leaf)
        if skip is None:
            return None
        stored = self.store.resume_view(self.conversation_id, skip_state_updates=skip)
        if stored.version != length:
            return None
        return sdk.stored_view(
            stored.payloads, stored.manipulation_indices, stored.unhandled_condensation_request
        )

    def event_ids(self, folder: str) -> builtins.list[str] | None:
        """The log's ids in order, for the SDK's index, when its scan of our file names would
        give exactly these (otherwise None: it lists and parses them itself)."""
        if _relative(folder) != sdk.EVENTS_DIR:
            return None
        ids = self._list_ids()
        return ids if sdk.scannable(ids) else None

    # -- helpers ------------------------------------------------------------------------

    def _write_base_state(self, contents: str | bytes) -> None:
        try:
            state = json.loads(contents)
        except ValueError:
            state = None  # the store refuses it with the reason
        if state is not None and state == self._implied and self._seen - self._stored_at <= MAX_LAG:
            return
        self.store.save_base_state(self.conversation_id, contents, at_version=self._seen)
        self._implied = state if isinstance(state, dict) else None
        self._stored_at = self._seen

    def _list_ids(self) -> builtins.list[str]:
        self._index = self.store.log_index(self.conversation_id)
        self._seen = len(self._index)
        self._implied = None  # another process may have written since
        return [event_id for event_id, _, _ in self._index]

    def _event_file_exists(self, file: str) -> bool:
        match = sdk.EVENT_NAME_RE.match(file)
        if match is None:
            return False
        try:
            found = self.store.events(self.conversation_id, after=int(match.group("idx")), limit=1)
        except ConversationNotFoundError:
            return False
        return bool(found) and found[0].event_id == match.group("event_id")

    def _read_base_state(self, path: str) -> str:
        state = self.store.base_state(self.conversation_id)
        if state is None:
            raise FileNotFoundError(path)
        if state.behind <= 0:
            return state.payload
        later = self.store.events(self.conversation_id, after=state.at_version)
        return sdk.catch_up(state.payload, [event.payload for event in later])

    def _fetch_around(self, index: int) -> None:
        """Fetch the payloads of a window of events around ``index`` in one query. A resume
        walks the log backwards from HEAD, a scan forwards: both are served by a window
        centred on the miss, doubled on each miss so a whole walk costs a few queries."""
        first = max(0, index - self._window)
        try:
            stored = self.store.events(
                self.conversation_id, after=first, limit=2 * self._window + 1
            )
        except ConversationNotFoundError:
            return  # no events: the read finds no file
        for event in stored:
            self._texts.setdefault(event.seq - 1, (event.event_id, event.payload_json))
        self._window = min(2 * self._window, _MAX_WINDOW)


def _branch_is_the_log(index: list[tuple[str, str, str | None]], leaf: str) -> bool | None:
    """Whether the SDK's active branch (docs/semantics.md §9) is the whole log in log order,
    up to its state updates, which a log of parent ids leaves off the branch and a log without
    them (written before the SDK had parent ids: each event's parent is the event before it)
    keeps on it. True: the branch is the log without its state updates; False: the log with
    them; None: neither (a branched log, or HEAD not on the last event), which the SDK folds
    itself."""
    position = {event_id: i for i, (event_id, _, _) in enumerate(index)}
    start = position.get(leaf)
    if start is None:
        return None
    branch = branch_positions([parent for _, _, parent in index], position, start)
    if branch != sorted(branch):
        return None
    on_branch = set(branch)
    updates = [i for i, (_, kind, _) in enumerate(index) if kind == sdk.STATE_UPDATE_KIND]
    if len(on_branch) + len(updates) - len(on_branch.intersection(updates)) != len(index):
        return None  # an event that is not a state update lies off the branch
    kept = len(on_branch.intersection(updates))
    if kept == 0:
        return True
    return False if kept == len(updates) else None


def _serve_resume_view(fs: object, leaf: str | None, length: int) -> View | None:
    return fs.resume_view(leaf, length) if isinstance(fs, ViewstoreFileStore) else None


def _serve_event_ids(fs: object, folder: str) -> list[str] | None:
    return fs.event_ids(folder) if isinstance(fs, ViewstoreFileStore) else None


sdk.install_resume_hook(_serve_resume_view)
sdk.install_scan_hook(_serve_event_ids)


def _relative(path: str) -> str:
    """The SDK's paths are relative to the conversation folder; LocalFileStore strips a
    leading slash and treats backslashes as separators, and so do we."""
    return path.replace("\\", "/").strip("/")
