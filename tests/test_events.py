"""``parse_event``: the 19 OpenHands kinds, lossless payloads, and precise rejections.

docs/semantics.md §1-2: an event's class is its ``kind``; the view logic reads only ``id`` and a few
tool-call and condensation fields. Everything else is kept, byte for byte in value, and a kind
this code does not know becomes an opaque event that the view ignores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from viewstore.domain.errors import InvalidEventError, PayloadTooLargeError, ViewstoreError
from viewstore.domain.events import KIND_ROLES, MAX_ID_LENGTH, Event, Role, parse_event
from viewstore.domain.view import View

ROLES: dict[str, Role] = {
    "SystemPromptEvent": Role.MESSAGE,
    "MessageEvent": Role.MESSAGE,
    "CondensationSummaryEvent": Role.MESSAGE,
    "ActionEvent": Role.ACTION,
    "ObservationEvent": Role.OBSERVATION,
    "UserRejectObservation": Role.OBSERVATION,
    "AgentErrorEvent": Role.OBSERVATION,
    "Condensation": Role.CONDENSATION,
    "CondensationRequest": Role.REQUEST,
    "ConversationStateUpdateEvent": Role.OTHER,
    "PauseEvent": Role.OTHER,
    "InterruptEvent": Role.OTHER,
    "ConversationErrorEvent": Role.OTHER,
    "HookExecutionEvent": Role.OTHER,
    "SecurityAnalysisEvent": Role.OTHER,
    "TokenEvent": Role.OTHER,
    "ACPToolCallEvent": Role.OTHER,
    "LLMCompletionLogEvent": Role.OTHER,
    "StreamingDeltaEvent": Role.OTHER,
}

# Kinds that never appear in the persisted reference streams (docs/semantics.md §1: the summary is
# synthesized, completion logs and streaming deltas are transient): made by hand here.
HANDMADE = {
    "CondensationSummaryEvent": (
        '{"id":"c1-summary","timestamp":"2025-06-11T19:12:05.272559","source":"environment",'
        '"summary":"The user asked for type hints.","kind":"CondensationSummaryEvent"}'
    ),
    "LLMCompletionLogEvent": (
        '{"id":"0b6c0a6e-1111-4000-8000-000000000001","source":"environment",'
        '"filename":"completion.json","log_data":"{}","model_name":"claude",'
        '"usage_id":"agent","kind":"LLMCompletionLogEvent"}'
    ),
    "StreamingDeltaEvent": (
        '{"id":"0b6c0a6e-1111-4000-8000-000000000002","source":"agent",'
        '"content":"Hel","reasoning_content":null,"kind":"StreamingDeltaEvent"}'
    ),
}


@pytest.fixture(scope="module")
def real_lines(vectors_dir: Path) -> dict[str, str]:
    """One real line per kind, taken from the reference streams (micro cases first)."""
    found: dict[str, str] = dict(HANDMADE)
    files = sorted((vectors_dir / "micro").glob("*.jsonl")) + sorted(
        (vectors_dir / "cases").glob("*.jsonl")
    )
    for path in files:
        for line in _lines(path):
            kind = json.loads(line)["kind"]
            if kind not in found:
                found[kind] = line
        if len(found) == len(ROLES):
            break
    return found


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as f:
        yield from (line.rstrip("\n") for line in f if line.strip())


def test_nineteen_kinds_and_their_roles() -> None:
    assert len(ROLES) == 19
    assert KIND_ROLES == ROLES


@pytest.mark.parametrize("kind", sorted(ROLES))
def test_each_kind_gets_its_role(kind: str, real_lines: dict[str, str]) -> None:
    line = real_lines[kind]
    event = parse_event(line)
    assert event.kind == kind
    assert event.role is ROLES[kind]
    assert event.known_kind is True
    assert event.id == json.loads(line)["id"]
    assert event.payload == json.loads(line)
    assert event.is_llm_convertible is (
        ROLES[kind] in (Role.MESSAGE, Role.ACTION, Role.OBSERVATION)
    )
    assert event.is_action is (kind == "ActionEvent")
    assert event.is_observation is (
        kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent")
    )


def test_read_fields(real_lines: dict[str, str]) -> None:
    action = parse_event(real_lines["ActionEvent"])
    raw = json.loads(real_lines["ActionEvent"])
    assert (action.tool_call_id, action.llm_response_id) == (
        raw["tool_call_id"],
        raw["llm_response_id"],
    )
    assert action.thinking is bool(raw["thinking_blocks"])
    assert action.parent_id == raw.get("parent_id")
    assert action.source == raw["source"]
    assert action.timestamp == raw["timestamp"]

    acp = parse_event(real_lines["ACPToolCallEvent"])
    assert "tool_call_id" in acp.payload
    assert acp.tool_call_id is None  # m24: not an action, its tool_call_id is not read

    summary = parse_event(real_lines["CondensationSummaryEvent"])
    assert summary.summary == "The user asked for type hints."


def test_condensation_fields() -> None:
    event = parse_event(
        '{"id":"c","source":"environment","forgotten_event_ids":["b","a","b"],'
        '"summary":"","summary_offset":0,"llm_response_id":"r","kind":"Condensation"}'
    )
    assert event.forgotten_event_ids == frozenset({"a", "b"})
    assert event.summary == ""
    assert event.summary_offset == 0
    assert event.inserts_summary is True
    assert event.summary_id == "c-summary"
    assert event.llm_response_id is None  # Condensation.llm_response_id is never read

    bare = parse_event({"id": "c", "forgotten_event_ids": [], "kind": "Condensation"})
    assert (bare.summary, bare.summary_offset, bare.inserts_summary) == (None, None, False)
    nulls = parse_event(
        {"id": "c", "summary": None, "summary_offset": None, "kind": "Condensation"}
    )
    assert nulls.forgotten_event_ids == frozenset()
    assert nulls.inserts_summary is False


@pytest.mark.parametrize(
    ("blocks", "thinking"),
    [
        ([{"type": "redacted_thinking", "data": "xx"}], True),
        ([{"type": "thinking", "thinking": ""}], True),
        ([], False),
        (None, False),
    ],
)
def test_thinking_is_a_non_empty_block_list(blocks: Any, thinking: bool) -> None:
    raw: dict[str, Any] = {"id": "a", "tool_call_id": "t", "llm_response_id": "r"}
    if blocks is not None:
        raw["thinking_blocks"] = blocks
    raw["kind"] = "ActionEvent"
    assert parse_event(raw).is_thinking_action is thinking


# --------------------------------------------------------------------------- inputs, payload


def test_dict_str_bytes_inputs_give_the_same_event(real_lines: dict[str, str]) -> None:
    line = real_lines["ActionEvent"]
    from_str = parse_event(line)
    assert parse_event(line.encode("utf-8")) == from_str
    assert parse_event(json.loads(line)) == from_str
    assert parse_event(from_str) is from_str


def test_payload_is_the_exact_original_object(vectors_dir: Path) -> None:
    """Every line of a real stream survives: same value, same key order, unicode kept."""
    for line in _lines(vectors_dir / "cases" / "048.jsonl"):
        event = parse_event(line)
        original = json.loads(line)
        assert event.payload == original
        assert list(event.payload) == list(original)
        assert json.loads(event.payload_json) == original
    event = parse_event('{"id":"u","text":"caf\\u00e9 \\ud83d\\ude00","n":1.5,"kind":"TokenEvent"}')
    assert event.payload == {"id": "u", "text": "café 😀", "n": 1.5, "kind": "TokenEvent"}
    assert event.payload_json == '{"id":"u","text":"café 😀","n":1.5,"kind":"TokenEvent"}'


def test_payload_is_a_fresh_copy() -> None:
    event = parse_event({"id": "x", "kind": "PauseEvent", "nested": {"a": [1]}})
    event.payload["nested"]["a"].append(2)
    assert event.payload == {"id": "x", "kind": "PauseEvent", "nested": {"a": [1]}}


def test_unknown_fields_are_kept_not_rejected() -> None:
    raw = {"id": "m", "source": "user", "brand_new_field": {"x": 1}, "kind": "MessageEvent"}
    assert parse_event(raw).payload == raw


def test_unknown_kind_is_an_opaque_non_llm_event() -> None:
    raw = {"id": "f", "tool_call_id": 5, "thinking_blocks": "?", "kind": "FutureEvent"}
    event = parse_event(raw)
    assert event.role is Role.OTHER
    assert event.known_kind is False
    assert event.is_llm_convertible is False
    assert event.tool_call_id is None
    assert event.payload == raw
    view = View.from_events(
        [{"id": "s", "kind": "SystemPromptEvent"}, event, {"id": "u", "kind": "MessageEvent"}]
    )
    assert view.event_ids == ["s", "u"]
    assert view.manipulation_indices == {0, 1, 2}


def test_same_payload_ignores_forgotten_ids_order() -> None:
    a = parse_event({"id": "c", "forgotten_event_ids": ["x", "y", "z"], "kind": "Condensation"})
    b = parse_event({"id": "c", "forgotten_event_ids": ["z", "x", "y"], "kind": "Condensation"})
    dup = parse_event(
        {"id": "c", "forgotten_event_ids": ["z", "x", "y", "x"], "kind": "Condensation"}
    )
    other = parse_event({"id": "c", "forgotten_event_ids": ["x", "y"], "kind": "Condensation"})
    assert a.payload_json != b.payload_json
    assert a.same_payload(b)
    assert b.same_payload(a)
    assert a.same_payload(dup)
    assert not a.same_payload(other)
    # Only a condensation's forgotten ids are a set; any other list keeps its order.
    t1 = parse_event({"id": "t", "values": [1, 2], "kind": "TokenEvent"})
    t2 = parse_event({"id": "t", "values": [2, 1], "kind": "TokenEvent"})
    assert not t1.same_payload(t2)
    assert t1.same_payload(parse_event('{"id": "t", "values": [1, 2], "kind": "TokenEvent"}'))


# --------------------------------------------------------------------------- rejections


def _reject(value: Any, **kwargs: Any) -> InvalidEventError:
    with pytest.raises(InvalidEventError) as info:
        parse_event(value, **kwargs)
    err = info.value
    assert isinstance(err, ValueError)
    assert isinstance(err, ViewstoreError)
    return err


def _names(
    err: InvalidEventError, kind: str | None, event_id: str | None, field: str | None
) -> None:
    assert (err.kind, err.event_id, err.field) == (kind, event_id, field)
    text = str(err)
    for part in (kind, event_id, field):
        if part is not None:
            assert part in text


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("{not json", "not valid JSON", id="not-json"),
        pytest.param("", "not valid JSON", id="empty-text"),
        pytest.param('{"id":"x","kind":"TokenEvent","v":NaN}', "not valid JSON", id="NaN"),
        pytest.param('{"id":"x","kind":"TokenEvent","v":-Infinity}', "not valid JSON", id="inf"),
        pytest.param(b'{"id":"\xff","kind":"PauseEvent"}', "not valid UTF-8", id="bad-utf8"),
        pytest.param("[1, 2]", "must be a JSON object, got list", id="list"),
        pytest.param([{"id": "x"}], "must be a JSON object, got list", id="list-value"),
        pytest.param("42", "must be a JSON object, got int", id="number"),
        pytest.param('"event"', "must be a JSON object, got str", id="string"),
        pytest.param("null", "must be a JSON object, got NoneType", id="null"),
        pytest.param(None, "must be a JSON object, got NoneType", id="None"),
    ],
)
def test_not_an_event_at_all(value: Any, reason: str) -> None:
    err = _reject(value)
    assert reason in str(err)
    _names(err, None, None, None)


def test_nan_in_a_dict_is_not_json() -> None:
    err = _reject({"id": "x", "v": float("nan"), "kind": "TokenEvent"})
    assert "not JSON-serializable" in err.reason
    _names(err, "TokenEvent", "x", None)


def test_lone_surrogate_is_not_utf8() -> None:
    err = _reject('{"id":"x","text":"\\ud800","kind":"MessageEvent"}')
    assert "surrogate" in err.reason
    _names(err, "MessageEvent", "x", None)


@pytest.mark.parametrize(
    ("raw", "event_id"),
    [
        ({"id": "x"}, "x"),
        ({"id": "x", "kind": None}, "x"),
        ({"id": "x", "kind": ""}, "x"),
        ({"id": "x", "kind": 7}, "x"),
        ({"id": 7}, None),
    ],
)
def test_missing_or_bad_kind(raw: dict[str, Any], event_id: str | None) -> None:
    _names(_reject(raw), None, event_id, "kind")


LONG_ID = "a" * (MAX_ID_LENGTH + 1)


@pytest.mark.parametrize(
    ("raw_id", "reason"),
    [
        pytest.param(None, "missing", id="missing"),
        pytest.param(7, "must be a string, got int", id="int"),
        pytest.param(["a"], "must be a string, got list", id="list"),
        pytest.param("", "must not be empty", id="empty"),
        pytest.param("__root__", "reserved", id="root"),
        pytest.param(LONG_ID, f"the limit is {MAX_ID_LENGTH}", id="too-long"),
        pytest.param("a/b", "'/'", id="slash"),
        pytest.param("a\\b", "'\\\\'", id="backslash"),
        pytest.param("a\nb", "'\\n'", id="newline"),
        pytest.param("a\x00b", "'\\x00'", id="nul"),
        pytest.param("a\x7fb", "'\\x7f'", id="del"),
    ],
)
def test_bad_id(raw_id: Any, reason: str) -> None:
    raw: dict[str, Any] = {"kind": "MessageEvent"}
    if raw_id is not None:
        raw["id"] = raw_id
    err = _reject(raw)
    assert reason in err.reason
    assert (err.kind, err.field) == ("MessageEvent", "id")
    assert "MessageEvent" in str(err)
    assert "'id'" in str(err)


def test_longest_allowed_id() -> None:
    assert parse_event({"id": "a" * MAX_ID_LENGTH, "kind": "PauseEvent"}).id == "a" * 512
    assert parse_event({"id": "cond-1", "kind": "PauseEvent"}).id == "cond-1"


@pytest.mark.parametrize(
    ("kind", "raw", "field", "reason"),
    [
        ("ActionEvent", {"llm_response_id": "r"}, "tool_call_id", "missing"),
        ("ActionEvent", {"tool_call_id": None, "llm_response_id": "r"}, "tool_call_id", "missing"),
        ("ActionEvent", {"tool_call_id": "t"}, "llm_response_id", "missing"),
        ("ActionEvent", {"tool_call_id": 1, "llm_response_id": "r"}, "tool_call_id", "string"),
        (
            "ActionEvent",
            {"tool_call_id": "t", "llm_response_id": "r", "thinking_blocks": {"a": 1}},
            "thinking_blocks",
            "must be a list, got dict",
        ),
        (
            "ActionEvent",
            {"tool_call_id": "t", "llm_response_id": "r", "thinking_blocks": "think"},
            "thinking_blocks",
            "must be a list, got str",
        ),
        ("ObservationEvent", {}, "tool_call_id", "missing"),
        ("AgentErrorEvent", {"error": "boom"}, "tool_call_id", "missing"),
        ("UserRejectObservation", {"tool_call_id": 3}, "tool_call_id", "string"),
        ("Condensation", {"summary_offset": -1}, "summary_offset", "must be >= 0, got -1"),
        ("Condensation", {"summary_offset": True}, "summary_offset", "got bool"),
        ("Condensation", {"summary_offset": 1.0}, "summary_offset", "got float"),
        ("Condensation", {"summary_offset": "1"}, "summary_offset", "got str"),
        ("Condensation", {"summary_offset": 2**63}, "summary_offset", "out of range"),
        ("Condensation", {"forgotten_event_ids": "a"}, "forgotten_event_ids", "list, got str"),
        ("Condensation", {"forgotten_event_ids": {"a": 1}}, "forgotten_event_ids", "got dict"),
        ("Condensation", {"forgotten_event_ids": ["a", 1]}, "forgotten_event_ids", "found int"),
        ("Condensation", {"forgotten_event_ids": [None]}, "forgotten_event_ids", "NoneType"),
        ("Condensation", {"summary": 5}, "summary", "string or null"),
        ("MessageEvent", {"source": 5}, "source", "string or null"),
        ("MessageEvent", {"parent_id": ["p"]}, "parent_id", "string or null"),
    ],
)
def test_bad_field(kind: str, raw: dict[str, Any], field: str, reason: str) -> None:
    err = _reject({"id": "ev-1", **raw, "kind": kind})
    assert reason in err.reason
    _names(err, kind, "ev-1", field)


def test_error_placed_in_a_batch() -> None:
    err = _reject({"id": "ev-1", "kind": "ObservationEvent"}).at_index(3)
    assert err.index == 3
    assert str(err) == "event #3, ObservationEvent, id='ev-1', field 'tool_call_id': missing"


def test_max_bytes() -> None:
    line = '{"id":"big","text":"' + "é" * 100 + '","kind":"MessageEvent"}'
    size = len(line.encode("utf-8"))
    assert parse_event(line, max_bytes=size).id == "big"

    with pytest.raises(PayloadTooLargeError) as info:
        parse_event(line, max_bytes=size - 1)
    err = info.value
    assert isinstance(err, InvalidEventError)
    assert isinstance(err, ValueError)
    assert err.reason == f"payload is {size} bytes, the limit is {size - 1}"
    _names(err, "MessageEvent", "big", None)

    # The same limit holds for dicts, bytes and already parsed events.
    for value in (json.loads(line), line.encode("utf-8"), parse_event(line)):
        with pytest.raises(PayloadTooLargeError, match="the limit is"):
            parse_event(value, max_bytes=size - 1)

    # Text far beyond the limit is refused before it is even parsed.
    with pytest.raises(PayloadTooLargeError, match=r"the limit is 10$"):
        parse_event(line, max_bytes=10)


def test_event_is_frozen() -> None:
    event = parse_event({"id": "x", "kind": "PauseEvent"})
    with pytest.raises(Exception, match="frozen"):
        event.id = "y"  # type: ignore[misc]
    assert isinstance(event, Event)


def test_a_stored_payload_rebuilds_the_event_parse_event_made() -> None:
    """``stored_event`` (a view read's rebuild, revision 0023) takes every field from where
    ``parse_event`` took it: equal Events for every event of the vectors a view can hold, the
    summaries their condensations insert included."""
    from viewstore.domain.events import stored_event, summary_event  # noqa: PLC0415

    cases = sorted((Path(__file__).parent / "data" / "vectors" / "cases").glob("*.jsonl"))
    rebuilt = 0
    for case in cases:
        for line in case.read_text().splitlines():
            event = parse_event(line)
            if event.role is Role.CONDENSATION:
                if not event.inserts_summary:
                    continue
                event = summary_event(event)
            assert stored_event(event.id, event.payload_json) == event, (case.name, event.id)
            rebuilt += 1
    assert rebuilt > 1000
