"""``ViewstoreFileStore`` file by file: what each SDK file operation does to the store."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from openhands.sdk import Message, MessageEvent, TextContent
from sqlalchemy import event as sa_event

from viewstore import ConcurrencyError, EventStore, InvalidArgumentError
from viewstore.openhands import ViewstoreFileStore

CID = uuid.UUID("5a3b1e00-0000-4000-8000-000000000001")


def message(text: str, parent: str | None = None) -> MessageEvent:
    return MessageEvent(
        source="user",
        llm_message=Message(role="user", content=[TextContent(text=text)]),
        parent_id=parent,
    )


def file_name(index: int, event: MessageEvent) -> str:
    return f"events/event-{index:05d}-{event.id}.json"


@pytest.fixture
def store(db_url: str) -> Any:
    store = EventStore(db_url)
    store.create_schema()
    yield store
    store.close()


def test_event_file_write_is_an_append_at_the_file_index(store: EventStore) -> None:
    fs = ViewstoreFileStore(store, CID)
    first, second = message("one"), message("two")
    fs.write(file_name(0, first), first.model_dump_json(exclude_none=True))
    fs.write(file_name(1, second), second.model_dump_json(exclude_none=True))
    assert store.view(CID.hex).event_ids == [first.id, second.id]
    assert fs.seen_version == 2
    # A writer that still believes the log has one event: refused, nothing written.
    stale = ViewstoreFileStore(store, CID)
    late = message("late")
    with pytest.raises(ConcurrencyError) as caught:
        stale.write(file_name(1, late), late.model_dump_json(exclude_none=True))
    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert store.version(CID) == 2


def test_listing_and_reading_the_log_takes_a_few_queries(store: EventStore) -> None:
    events = [message(f"m{i}") for i in range(600)]
    store.append(CID, events)  # SDK event objects, stored as the SDK writes them
    fs = ViewstoreFileStore(store, CID)
    statements: list[str] = []
    sa_event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    names = fs.list("events")
    assert names == [file_name(i, e) for i, e in enumerate(events)]
    # The SDK's resume walks the log from its end back to its start.
    texts = [fs.read(name) for name in reversed(names)][::-1]
    payload_reads = [s for s in statements if "events.payload" in s]
    assert len(payload_reads) == 2, payload_reads  # windows of 256, then 512, around a miss
    assert len(statements) <= 8, statements  # plus the listing and existence checks
    for text, original in zip(texts, events, strict=True):
        assert json.loads(text) == json.loads(original.model_dump_json(exclude_none=True))
    with pytest.raises(FileNotFoundError):
        fs.read(f"events/event-00000-{uuid.uuid4()}.json")  # right index, wrong id


def test_sdk_event_objects_and_dashed_ids(store: EventStore) -> None:
    event = message("hi")
    store.append(str(CID), event, expected_version=0)  # dashed: normalised to the hex
    assert store.conversation_ids() == [CID.hex]
    (stored,) = store.events(CID.hex)
    assert stored.payload_json == json.dumps(
        json.loads(event.model_dump_json(exclude_none=True)), separators=(",", ":")
    )


def test_base_state_is_versioned_and_refused_from_a_writer_behind(store: EventStore) -> None:
    fs = ViewstoreFileStore(store, CID)
    with pytest.raises(FileNotFoundError):
        fs.read("base_state.json")
    assert not fs.exists("base_state.json")
    fs.write("base_state.json", '{"id": "x", "leaf_event_id": null}')
    first = message("one")
    fs.write(file_name(0, first), first.model_dump_json(exclude_none=True))
    fs.write("base_state.json", json.dumps({"id": "x", "leaf_event_id": first.id}))
    state = store.base_state(CID)
    assert state is not None and (state.revision, state.at_version, state.behind) == (2, 1, 0)
    stale = ViewstoreFileStore(store, CID)  # has seen no event
    with pytest.raises(ConcurrencyError):
        stale.write("base_state.json", '{"id": "x", "leaf_event_id": null}')
    assert json.loads(fs.read("base_state.json"))["leaf_event_id"] == first.id
    with pytest.raises(InvalidArgumentError):
        fs.write("base_state.json", "[1, 2]")
    assert store.base_state(CID).revision == 2  # type: ignore[union-attr]


def test_base_state_read_catches_up_with_events_its_writer_did_not_see(
    store: EventStore,
) -> None:
    fs = ViewstoreFileStore(store, CID)
    first = message("one")
    fs.write(file_name(0, first), first.model_dump_json(exclude_none=True))
    fs.write("base_state.json", json.dumps({"id": "x", "leaf_event_id": first.id}))
    # The process died after writing its next event, before the base state that follows it.
    second = message("two", parent=first.id)
    fs.write(file_name(1, second), second.model_dump_json(exclude_none=True))
    state = json.loads(ViewstoreFileStore(store, CID).read("base_state.json"))
    assert state["leaf_event_id"] == second.id
    assert state["last_user_message_id"] == second.id
    assert store.base_state(CID).behind == 1  # type: ignore[union-attr]  # stored as written


def test_markers_other_paths_and_deletes(store: EventStore) -> None:
    fs = ViewstoreFileStore(store, CID)
    first = message("one")
    assert not fs.exists(file_name(0, first))  # no conversation yet: no file, no error
    with pytest.raises(FileNotFoundError):
        fs.read(file_name(0, first))
    assert fs.list("events") == []
    assert fs.exists("events/.eventlog-len-0.marker")
    fs.write("events/.eventlog-len-1.marker", "")  # kept nowhere
    assert not fs.exists("events/.eventlog-len-1.marker")
    fs.delete("events/.eventlog-len-0.marker")
    with pytest.raises(InvalidArgumentError):
        fs.write("notes/other.txt", "x")
    fs.write(file_name(0, first), first.model_dump_json(exclude_none=True))
    assert fs.exists(file_name(0, first)) and fs.exists("events")
    assert fs.list("") == ["events/"]
    with pytest.raises(InvalidArgumentError):
        fs.delete(file_name(0, first))
    assert store.version(CID) == 1


def test_lock_excludes_the_threads_sharing_the_file_store(store: EventStore) -> None:
    # Other writers need no lock: each appends at the version its file name gives, so the
    # second of two is refused (tests/openhands/test_processes.py races two processes).
    fs = ViewstoreFileStore(store, CID)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with fs.lock("events/.eventlog.lock"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        with pytest.raises(TimeoutError), fs.lock("events/.eventlog.lock", timeout=0.3):
            pass
        assert time.monotonic() - started >= 0.3
    finally:
        release.set()
        thread.join()
    with fs.lock("events/.eventlog.lock", timeout=5):  # free once the holder is done
        pass


@pytest.mark.parametrize("ids", ["sdk", "not-hex"])
def test_event_log_index_is_what_the_sdks_own_scan_builds(store: Any, ids: str) -> None:
    """The scan hook fills EventLog's index from the stored ids; the SDK's own scan of the
    same files (in its in-memory file store) must build the same one. Ids the SDK's file
    name pattern refuses send the hook back to the SDK's scan."""
    from openhands.sdk.conversation.event_store import EventLog  # noqa: PLC0415
    from openhands.sdk.io import InMemoryFileStore  # noqa: PLC0415

    events = [message(f"m{i}") for i in range(5)]
    if ids == "not-hex":
        events[3] = events[3].model_copy(update={"id": "not-an-sdk-id"})
    fs, files = ViewstoreFileStore(store, CID), InMemoryFileStore()
    for index, event in enumerate(events):
        text = event.model_dump_json(exclude_none=True)
        files.write(file_name(index, event), text)
        if event.id == "not-an-sdk-id":  # the file store takes SDK names only; the API any id
            store.append(CID, text, expected_version=index)
        else:
            fs.write(file_name(index, event), text)
    ours, theirs = EventLog(fs), EventLog(files)
    assert (len(ours), ours._idx_to_id, ours._id_to_idx) == (
        len(theirs),
        theirs._idx_to_id,
        theirs._id_to_idx,
    )
    assert len(ours) == (5 if ids == "sdk" else 3)
    assert (fs.event_ids("events") is None) is (ids == "not-hex")


def test_an_event_file_refused_for_its_name_writes_nothing(store: EventStore) -> None:
    """A file named for one event that holds another is refused before anything is stored:
    the version stays, no event lands, and the right file then goes in at that index."""
    fs = ViewstoreFileStore(store, CID)
    events = [message(f"m{i}") for i in range(3)]
    for index, event in enumerate(events):
        fs.write(file_name(index, event), event.model_dump_json(exclude_none=True))
    inside, named = message("inside"), message("named")
    with pytest.raises(InvalidArgumentError, match=inside.id):
        fs.write(file_name(3, named), inside.model_dump_json(exclude_none=True))
    assert store.version(CID) == 3
    assert store.view(CID).event_ids == [e.id for e in events]
    assert not fs.exists(file_name(3, inside)) and fs.seen_version == 3
    # A retry of a stored event under another file name is refused too (it appends nothing,
    # but the SDK would then index that file under an id it does not hold).
    with pytest.raises(InvalidArgumentError):
        fs.write(file_name(2, named), events[2].model_dump_json(exclude_none=True))
    fs.write(file_name(3, inside), inside.model_dump_json(exclude_none=True))
    assert store.version(CID) == 4
