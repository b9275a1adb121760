"""The append/read contract of EventStore: versions, retries, duplicates, exact payloads, errors."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from viewstore import (
    ConcurrencyError,
    ConversationNotFoundError,
    DuplicateEventError,
    EventStore,
    InvalidArgumentError,
    InvalidEventError,
    PayloadTooLargeError,
    ViewstoreError,
    parse_event,
)

from ..store._helpers import A, C, E, M, O, Payload, R, S, U, X, dump, triple

CID = "conv-1"


# --------------------------------------------------------------------------- versions


def test_first_append_creates_the_conversation(store: EventStore) -> None:
    result = store.append(CID, [S(), U("u1")], expected_version=0)
    assert result.version == 2
    assert result.created
    assert result.first_seq == 1
    assert result.appended == ["S", "u1"]
    assert result.duplicates == []
    assert store.version(CID) == 2
    assert store.conversation_ids() == [CID]
    assert store.view(CID).event_ids == ["S", "u1"]


def test_append_without_expected_version_is_unconditional(store: EventStore) -> None:
    store.append(CID, S())
    result = store.append(CID, U("u1"))
    assert result.version == 2
    assert result.first_seq == 2
    assert not result.created


def test_expected_version_zero_on_existing_conversation_conflicts(store: EventStore) -> None:
    store.append(CID, [S(), U("u1")])
    before = dump(store.engine)
    with pytest.raises(ConcurrencyError) as caught:
        store.append(CID, M("m1"), expected_version=0)
    assert caught.value.expected == 0
    assert caught.value.actual == 2
    assert caught.value.conversation_id == CID
    assert isinstance(caught.value, ViewstoreError)
    assert dump(store.engine) == before  # found before anything was written


def test_stale_expected_version_raises_before_writing(store: EventStore) -> None:
    store.append(CID, [S(), U("u1"), M("m1")], expected_version=0)
    before = dump(store.engine)
    for stale in (1, 2, 4, 100):
        with pytest.raises(ConcurrencyError) as caught:
            store.append(CID, [U("u2"), M("m2")], expected_version=stale)
        assert (caught.value.expected, caught.value.actual) == (stale, 3)
    assert dump(store.engine) == before
    assert store.append(CID, [U("u2")], expected_version=3).version == 4


def test_expected_version_on_missing_conversation(store: EventStore) -> None:
    with pytest.raises(ConcurrencyError) as caught:
        store.append(CID, S(), expected_version=3)
    assert (caught.value.expected, caught.value.actual) == (3, 0)
    with pytest.raises(ConversationNotFoundError):
        store.view(CID)


def test_malformed_expected_version(store: EventStore) -> None:
    for bad in (-1, True, 1.5, "1"):
        with pytest.raises(InvalidArgumentError):
            store.append(CID, S(), expected_version=bad)  # type: ignore[arg-type]
    assert store.conversation_ids() == []


# --------------------------------------------------------------------------- retries


def test_resending_stored_events_is_a_reported_noop(store: EventStore) -> None:
    store.append(CID, [S(), U("u1"), A("a1", "t1", "r1")])
    before = dump(store.engine)
    result = store.append(CID, [U("u1"), A("a1", "t1", "r1")])
    assert result.version == 3
    assert result.appended == []
    assert result.duplicates == ["u1", "a1"]
    assert result.rows_written == 0
    assert dump(store.engine) == before


def test_retry_with_new_events_writes_only_the_new_ones(store: EventStore) -> None:
    store.append(CID, [S(), U("u1")])
    result = store.append(CID, [U("u1"), M("m1")])
    assert result.appended == ["m1"]
    assert result.duplicates == ["u1"]
    assert result.version == 3
    assert [e.event_id for e in store.events(CID)] == ["S", "u1", "m1"]


def test_condensation_retry_with_reordered_forgotten_ids(store: EventStore) -> None:
    store.append(CID, [S(), U("u1"), M("m1"), U("u2"), C("c1", ["u1", "m1"], "sum", 1)])
    before = dump(store.engine)
    result = store.append(CID, C("c1", ["m1", "u1"], "sum", 1))
    assert result.duplicates == ["c1"]
    assert result.appended == []
    assert dump(store.engine) == before


def test_exact_resend_with_the_old_expected_version_is_a_retry(store: EventStore) -> None:
    """A worker whose commit succeeded but whose reply was lost sends the same call again."""
    store.append(CID, [S(), U("u1")], expected_version=0)
    batch = [A("a1", "t1", "r1"), O("o1", "t1")]
    first = store.append(CID, batch, expected_version=2)
    before = dump(store.engine)
    again = store.append(CID, batch, expected_version=2)
    assert first.version == again.version == 4
    assert again.duplicates == ["a1", "o1"]
    assert again.appended == []
    assert dump(store.engine) == before
    # ... but a different batch at the old version is a real conflict.
    with pytest.raises(ConcurrencyError):
        store.append(CID, [A("a2", "t2", "r2"), O("o2", "t2")], expected_version=2)


def test_same_id_with_a_different_payload_is_rejected(store: EventStore) -> None:
    store.append(CID, [S(), U("u1", "hello")])
    before = dump(store.engine)
    with pytest.raises(DuplicateEventError) as caught:
        store.append(CID, [M("m1"), U("u1", "changed")])
    assert caught.value.event_id == "u1"
    assert isinstance(caught.value, ValueError)
    assert dump(store.engine) == before


def test_same_id_twice_in_one_batch_is_invalid(store: EventStore) -> None:
    with pytest.raises(InvalidEventError) as caught:
        store.append(CID, [S(), U("u1"), M("u1")])
    assert caught.value.event_id == "u1"
    assert caught.value.index == 2
    with pytest.raises(ConversationNotFoundError):
        store.events(CID)


def test_event_ids_are_scoped_per_conversation(store: EventStore) -> None:
    store.append("one", [S(), U("u1", "first")])
    store.append("two", [S(), U("u1", "second")])
    assert store.events("two")[1].payload["llm_message"]["content"][0]["text"] == "second"


# --------------------------------------------------------------------------- reading events


def test_events_returns_exact_payloads_in_order(store: EventStore) -> None:
    appended = [S(), U("u1"), A("a1", "t1", "r1"), O("o1", "t1"), X("x1"), R("r1")]
    store.append(CID, appended[:3])
    store.append(CID, appended[3:])
    stored = store.events(CID)
    assert [e.seq for e in stored] == [1, 2, 3, 4, 5, 6]
    assert [e.event_id for e in stored] == [p["id"] for p in appended]
    assert [e.kind for e in stored] == [p["kind"] for p in appended]
    assert [e.payload for e in stored] == appended
    assert [list(e.payload) for e in stored] == [list(p) for p in appended]  # key order kept
    assert all(isinstance(e.recorded_at, datetime) for e in stored)
    assert all(e.recorded_at.tzinfo is not None for e in stored)
    assert stored[0].recorded_at <= stored[3].recorded_at


def test_events_after_and_limit(store: EventStore) -> None:
    store.append(CID, [S(), U("u1"), M("m1"), U("u2"), M("m2")])
    assert [e.seq for e in store.events(CID, after=2)] == [3, 4, 5]
    assert [e.seq for e in store.events(CID, after=1, limit=2)] == [2, 3]
    assert [e.seq for e in store.events(CID, limit=0)] == []
    assert store.events(CID, after=5) == []
    with pytest.raises(InvalidArgumentError):
        store.events(CID, limit=-1)


def test_missing_conversation(store: EventStore) -> None:
    for read in (store.view, store.events, store.resume_view, store.replay, store.version):
        with pytest.raises(ConversationNotFoundError) as caught:
            read("nope")
        assert isinstance(caught.value, LookupError)
        assert isinstance(caught.value, ViewstoreError)
    with pytest.raises(ConversationNotFoundError):
        store.view("nope", as_of=0)


def test_as_of_bounds(store: EventStore) -> None:
    store.append(CID, [S(), U("u1"), M("m1")])
    assert store.view(CID, as_of=0).event_ids == []
    assert store.view(CID, as_of=0).manipulation_indices == [0]
    assert store.view(CID, as_of=3).event_ids == ["S", "u1", "m1"]
    for bad in (-1, 4, True, 1.0, "2"):
        with pytest.raises(InvalidArgumentError):
            store.view(CID, as_of=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            store.replay(CID, as_of=bad)  # type: ignore[arg-type]


def test_stored_view_fields(store: EventStore) -> None:
    store.append(CID, [S(), U("u1"), A("a1", "t1", "r1"), O("o1", "t1"), R("req")])
    view = store.view(CID)
    assert view.conversation_id == CID
    assert view.version == 5
    assert view.event_ids == ["S", "u1", "a1", "o1"]
    assert [e.id for e in view.events] == view.event_ids
    assert view.events[2].payload == A("a1", "t1", "r1")
    assert view.manipulation_indices == [0, 1, 2, 4]
    assert view.unhandled_condensation_request is True
    assert view.as_of is None


def test_summary_is_a_view_event(store: EventStore) -> None:
    store.append(CID, [S(), U("u1"), M("m1"), C("c1", ["u1"], "what happened", 1)])
    view = store.view(CID)
    assert view.event_ids == ["S", "c1-summary", "m1"]
    summary = view.events[1]
    assert summary.kind == "CondensationSummaryEvent"
    assert summary.payload["summary"] == "what happened"


# --------------------------------------------------------------------------- payloads


PAYLOAD_TEXTS = [
    "nul \u0000 inside, and another at the end\u0000",
    "non-ASCII: ünïcödé — 日本語 — עברית — emoji 🚀👩‍💻 — \u2028 line sep",
    'escapes: \\ " / \b \f \n \r \t and \u007f',
]


def test_payload_round_trips_exactly(store: EventStore) -> None:
    for n, text in enumerate(PAYLOAD_TEXTS):
        payload = O("o1", "t1", content=text)
        payload["extra"] = {"nested": [text, 1, 1.5, None, True, {"k": text}], text: "as a key"}
        store.append(f"c{n}", [S(), A("a1", "t1", "r1"), payload])
        (stored,) = store.events(f"c{n}", after=2)
        assert stored.payload == payload, text
        assert store.view(f"c{n}").events[2].payload == payload, text
    assert store.verify().ok


def test_multi_megabyte_observation_round_trips(store: EventStore) -> None:
    big = "".join(chr(0x20 + i % 0x5E) for i in range(3 * 1024 * 1024)) + "€🚀\u0000"
    payload = O("o1", "t1", content=big)
    store.append(CID, [S(), A("a1", "t1", "r1"), payload])
    (stored,) = store.events(CID, after=2)
    assert stored.payload == payload
    assert store.view(CID).events[2].payload == payload
    assert store.verify(CID).ok


def test_nul_in_a_condensation_summary_round_trips(store: EventStore) -> None:
    condensation = C("c1", ["u1"], "sum\u0000mary", 1)
    store.append(CID, [S(), U("u1"), M("m1"), condensation])
    assert store.events(CID)[-1].payload == condensation
    assert store.view(CID).events[1].payload["summary"] == "sum\u0000mary"
    assert store.verify(CID).ok


NUL_IN_COLUMNS: list[tuple[str, Payload]] = [
    ("tool_call_id", A("a1", "t\u00001", "r1")),
    ("llm_response_id", A("a1", "t1", "r\u00001")),
    ("kind", {"id": "k1", "kind": "Custom\u0000Event"}),
    ("source", {**U("u9"), "source": "us\u0000er"}),
    ("timestamp", {**U("u9"), "timestamp": "2026-01-01\u0000"}),
    ("parent_id", {**U("u9"), "parent_id": "p\u0000"}),
    ("forgotten_event_ids", C("c9", ["u1", "bad\u0000id"])),
]


def test_nul_in_a_field_with_its_own_column_is_invalid_on_every_backend(
    store: EventStore,
) -> None:
    """PostgreSQL text cannot hold NUL, so the contract rejects it everywhere alike."""
    store.append(CID, [S(), U("u1")])
    before = dump(store.engine)
    for field, event in NUL_IN_COLUMNS:
        with pytest.raises(InvalidEventError) as caught:
            store.append(CID, [M("m1"), event])
        assert (caught.value.field, caught.value.index) == (field, 1)
    assert dump(store.engine) == before


def test_accepts_dicts_json_text_bytes_and_parsed_events(store: EventStore) -> None:
    events = [S(), U("u1"), A("a1", "t1", "r1"), O("o1", "t1")]
    inputs: list[object] = [
        events[0],
        json.dumps(events[1]),
        json.dumps(events[2], ensure_ascii=False).encode("utf-8"),
        parse_event(events[3]),
    ]
    result = store.append(CID, inputs)  # type: ignore[arg-type]
    assert result.appended == ["S", "u1", "a1", "o1"]
    assert [e.payload for e in store.events(CID)] == events
    # A single event need not be wrapped in a list, in any of the forms.
    store.append(CID, json.dumps(M("m1")))
    store.append(CID, json.dumps(M("m2")).encode())
    store.append(CID, parse_event(M("m3")))
    assert store.view(CID).event_ids[-3:] == ["m1", "m2", "m3"]


INVALID: list[object] = [
    {"id": "x", "source": "user"},  # no kind
    {"kind": "MessageEvent", "source": "user"},  # no id
    {"id": "a", "kind": "ActionEvent", "llm_response_id": "r"},  # no tool_call_id
    "not json",
    b"\xff\xfe",
    "[1, 2]",
]


def test_invalid_events_are_rejected(store: EventStore) -> None:
    for bad in INVALID:
        with pytest.raises(InvalidEventError) as caught:
            store.append(CID, [S(), bad])  # type: ignore[list-item]
        assert caught.value.index == 1, bad
    assert store.conversation_ids() == []


# --------------------------------------------------------------------------- replay


def test_replay_equals_view_at_every_seq(store: EventStore) -> None:
    events = [
        S(),
        U("u1"),
        A("a1", "t1", "r1", thinking=True),
        A("a2", "t2", "r1", thinking=True),
        O("o2", "t2"),
        O("o1", "t1"),
        R("req"),
        M("m1"),
        C("c1", ["u1", "a1", "o1", "ghost"], "summary", 1),
        U("u2"),
        A("a3", "t3", "r3"),
        E("e3", "t3"),
        C("c2", ["c1-summary"], None, None),
        X("x1"),
    ]
    for event in events:
        store.append(CID, event)
    for seq in range(len(events) + 1):
        assert triple(store.replay(CID, as_of=seq)) == triple(store.view(CID, as_of=seq)), seq
    assert triple(store.replay(CID)) == triple(store.view(CID))
    assert store.replay(CID).version == store.view(CID).version == len(events)
    assert store.verify(CID).ok


def test_resume_view_applies_enforcement(store: EventStore) -> None:
    """An orphan action at the tail stays in the live view; the resume path drops it."""
    store.append(CID, [S(), U("u1"), A("a1", "t1", "r1")])
    assert store.view(CID).event_ids == ["S", "u1", "a1"]
    resume = store.resume_view(CID)
    assert resume.event_ids == ["S", "u1"]
    assert resume.version == 3


def test_default_event_size_limit_is_64_mib(store: EventStore) -> None:
    """docs/guarantees.md: one event is at most 64 MiB by default."""
    assert store.max_event_bytes == 64 * 1024 * 1024
    before = dump(store.engine)
    event = M("huge")
    event["llm_message"] = {"role": "assistant", "content": "x" * store.max_event_bytes}
    with pytest.raises(PayloadTooLargeError):
        store.append("c", [event])
    assert dump(store.engine) == before


def test_sqlite_writers_wait_30_s_for_the_lock(store: EventStore) -> None:
    """docs/guarantees.md: on SQLite an append waits up to 30 s for the single write lock."""
    if store.engine.dialect.name != "sqlite":
        return  # the busy timeout is an SQLite setting; PostgreSQL waits on the row lock
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
