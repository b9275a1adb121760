"""Which parts of an event a redaction may replace (issue 26, item 7).

A redaction by JSON Pointer never replaces a string the whole-content redaction keeps: the
envelope, and the names of types, roles and tools, ids and enumerated states at any depth
(``viewstore.domain.scrub``). A path at (or into) one of them is refused with
``UnredactablePathError``; a path at an object or array redacts what is inside except those.
Proved three ways against the real OpenHands SDK:

- every JSON Pointer of every shape in the reference vectors is either refused or leaves an
  event the SDK reads back as the same kind with the same id (and viewstore as the same
  envelope);
- every field the SDK's models constrain (a ``Literal``, an enum, a discriminator) is one the
  redaction keeps;
- on a real SDK conversation, after every redaction the store accepts, the SDK resumes the
  conversation and runs a step.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

import openhands.sdk  # noqa: F401 - the SDK package first: its event module imports in order
from openhands.sdk.event import Event as SdkEvent

from tests.openhands._agent import make_agent, sdk_view, store_view
from tests.openhands.test_redacted_events import _reference_events
from viewstore import EventStore, InvalidArgumentError, UnredactablePathError, parse_event
from viewstore.domain.events import Event
from viewstore.domain.scrub import ENVELOPE, KEPT_ANYWHERE, MARK, redacted_payload
from viewstore.openhands import open_conversation


def _pointed(value: Any, at: str = "") -> Iterator[tuple[str, Any]]:
    """Every JSON Pointer (RFC 6901) into ``value`` below its root, containers included, with
    the value it points at."""
    if isinstance(value, dict):
        items: Any = (
            (key.replace("~", "~0").replace("/", "~1"), inner) for key, inner in value.items()
        )
    elif isinstance(value, list):
        items = ((str(index), inner) for index, inner in enumerate(value))
    else:
        return
    for token, inner in items:
        yield f"{at}/{token}", inner
        yield from _pointed(inner, f"{at}/{token}")


def _pointers(value: Any) -> Iterator[str]:
    return (pointer for pointer, _ in _pointed(value))


def _shape(kind: str, pointer: str) -> tuple[str, str]:
    # Array positions do not change what a field means: one pointer per shape covers them all.
    return kind, re.sub(r"/\d+(?=/|$)", "/*", pointer)


def _envelope(event: Event) -> dict[str, Any]:
    # A summary is content: whether there is one is what the view reads.
    return {
        **event.model_dump(exclude={"payload_json", "summary"}),
        "summary": event.summary is None,
    }


def _sdk_identity(payload: str) -> tuple[str, str]:
    back = SdkEvent.model_validate_json(payload)
    return type(back).__name__, back.id


def test_every_path_of_the_reference_events_is_refused_or_still_parses(
    vectors_dir: Path,
) -> None:
    seen: set[tuple[str, str]] = set()
    accepted: list[str] = []
    refused: list[str] = []
    for line in _reference_events(vectors_dir):
        event = parse_event(line)
        for pointer in _pointers(json.loads(event.payload_json)):
            if _shape(event.kind, pointer) in seen:
                continue
            seen.add(_shape(event.kind, pointer))
            try:
                redacted = redacted_payload(event.payload_json, [pointer])
            except UnredactablePathError as error:
                assert pointer in str(error) and error.path == pointer
                refused.append(pointer)
                continue
            where = f"{event.kind} {event.id} {pointer}"
            assert _sdk_identity(redacted) == (event.kind, event.id), where
            assert _envelope(parse_event(redacted)) == _envelope(event), where
            accepted.append(pointer)
    assert len(seen) > 1_000
    # The five, and the structure around them, are among the refused.
    for pointer in (
        "/llm_message/role",
        "/llm_message/content/0/type",
        "/tool_name",
        "/action/kind",
        "/observation/kind",
        "/tool_call/id",
        "/tool_call/name",
        "/kind",
        "/id",
    ):
        assert pointer in refused, pointer
    assert "/observation/content/0/text" in accepted and "/llm_message/content" in accepted


def test_a_path_to_an_object_keeps_its_structure_and_redacts_the_rest(vectors_dir: Path) -> None:
    line = next(
        text
        for text in _reference_events(vectors_dir)
        if json.loads(text)["kind"] == "ActionEvent" and "tool_call" in json.loads(text)
    )
    original = json.loads(line)
    redacted = json.loads(redacted_payload(parse_event(line).payload_json, ["/tool_call"]))
    call = redacted["tool_call"]
    assert call["arguments"] == MARK
    assert {key: call[key] for key in ("id", "name", "origin")} == {
        key: original["tool_call"][key] for key in ("id", "name", "origin")
    }


def _accepted(payload: str, pointer: str) -> bool:
    try:
        redacted_payload(payload, [pointer])
    except UnredactablePathError:
        return False
    return True


def _first(vectors_dir: Path, kind: str, pointer: str) -> str:
    """The payload of the first reference event of ``kind`` that has a value at ``pointer``."""
    for line in _reference_events(vectors_dir):
        event = parse_event(line)
        if event.kind == kind and pointer in _pointers(json.loads(event.payload_json)):
            return event.payload_json
    raise AssertionError(f"no {kind} with {pointer} in the reference vectors")


@pytest.mark.parametrize(
    ("kind", "pointer", "field"),
    [  # the five first
        ("MessageEvent", "/llm_message/role", "role"),
        ("MessageEvent", "/llm_message/content/0/type", "type"),
        ("ActionEvent", "/tool_name", "tool_name"),
        ("ActionEvent", "/action/kind", "kind"),
        ("ObservationEvent", "/observation/kind", "kind"),
        ("ActionEvent", "/tool_call/id", "id"),
        ("ActionEvent", "/tool_call/name", "name"),
        ("ActionEvent", "/security_risk", "security_risk"),
        ("SecurityAnalysisEvent", "/risks", "risks"),
        ("ObservationEvent", "/action_id", "action_id"),
        ("Condensation", "/forgotten_event_ids/0", "forgotten_event_ids"),
        ("ActionEvent", "/kind", "kind"),
    ],
)
def test_a_structural_path_is_refused_naming_it(
    vectors_dir: Path, kind: str, pointer: str, field: str
) -> None:
    payload = _first(vectors_dir, kind, pointer)
    redactable = next(p for p in _string_pointers(payload) if _accepted(payload, p))
    with pytest.raises(UnredactablePathError, match=re.escape(pointer)) as caught:
        redacted_payload(payload, [redactable, pointer])  # one refused: all refused
    assert isinstance(caught.value, InvalidArgumentError)
    assert (caught.value.path, caught.value.field) == (pointer, field)


def test_a_risk_map_under_a_kept_name_is_refused_whole(vectors_dir: Path) -> None:
    """``risks`` maps action ids to enumerated risks: a path into it is refused too."""
    payload = _first(vectors_dir, "SecurityAnalysisEvent", "/risks")
    (action_id, *_) = json.loads(payload)["risks"]
    with pytest.raises(UnredactablePathError, match="goes into 'risks'"):
        redacted_payload(payload, [f"/risks/{action_id}"])


def _constrained_fields(schema: dict[str, Any]) -> dict[str, set[str]]:
    """The property names whose string values the SDK's models constrain (a ``Literal``, an
    enum, a pattern or a format), each with the models that declare it."""
    definitions = schema.get("$defs", {})

    def constrains(node: dict[str, Any]) -> bool:
        if "$ref" in node:
            node = definitions[node["$ref"].rsplit("/", 1)[-1]]
        if any(key in node for key in ("enum", "const", "pattern", "format")):
            return True
        alternatives = node.get("anyOf", []) + node.get("oneOf", []) + node.get("allOf", [])
        items = node.get("items")
        inner = [*alternatives, *([items] if isinstance(items, dict) else [])]
        return any(isinstance(option, dict) and constrains(option) for option in inner)

    found: dict[str, set[str]] = {}
    for model, definition in definitions.items():
        for name, prop in definition.get("properties", {}).items():
            if isinstance(prop, dict) and constrains(prop):
                found.setdefault(name, set()).add(model)
    return found


def test_every_field_the_sdk_constrains_is_kept() -> None:
    """Not only the names seen in the vectors: every model the SDK's event union reaches."""
    constrained = _constrained_fields(SdkEvent.model_json_schema())
    assert {"kind", "type", "role", "source", "security_risk"} <= set(constrained)
    missing = {
        name: sorted(models)
        for name, models in constrained.items()
        if name not in KEPT_ANYWHERE and name not in ENVELOPE
    }
    assert not missing, f"constrained by the SDK, yet redacted: {missing}"


# -- the adapter: every accepted redaction still resumes ----------------------------------


def _string_pointers(payload: str) -> list[str]:
    return [pointer for pointer, value in _pointed(json.loads(payload)) if isinstance(value, str)]


def _copy(store: EventStore, source: uuid.UUID) -> uuid.UUID:
    """A new conversation holding the source's events and base state: a fork would share
    its prefix with the source, so a redaction through it would land in the source too."""
    copy = uuid.uuid4()
    store.append(copy, [parse_event(stored.payload_json) for stored in store.events(source)])
    state = store.base_state(source)
    assert state is not None
    payload = state.payload.replace(str(source), str(copy))
    store.save_base_state(copy, payload, at_version=state.at_version)
    return copy


def test_every_redaction_the_store_accepts_leaves_a_conversation_the_sdk_resumes(
    db_url: str, tmp_path: Path
) -> None:
    """One real SDK conversation (parallel tool calls, thinking, a condensation); then, for
    every event, its whole-content redaction and a redaction of each of its strings, each on a
    fresh copy.
    Every redaction the store accepts is resumed by the SDK, which runs one more step on it;
    every one it refuses is refused with ``UnredactablePathError`` and changes nothing."""
    source = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        conversation = open_conversation(
            store, make_agent(5, "a", max_size=6), tmp_path / "ws", source, visualizer=None
        )
        conversation.send_message("Start.")
        conversation.run()
        history = list(store.events(source))
        assert {"ActionEvent", "ObservationEvent", "MessageEvent", "Condensation"} <= {
            e.kind for e in history
        }
        attempts: list[tuple[str, list[str] | None]] = []
        for stored in history:
            attempts.append((stored.event_id, None))
            attempts.extend(
                (stored.event_id, [pointer]) for pointer in _string_pointers(stored.payload_json)
            )
        accepted = refused = 0
        for event_id, paths in attempts:
            copy = _copy(store, source)
            before = [e.payload_json for e in store.events(copy)]
            try:
                store.redact(copy, event_id, reason="test", paths=paths)
            except UnredactablePathError as error:
                assert paths is not None and error.path == paths[0]
                assert [e.payload_json for e in store.events(copy)] == before
                refused += 1
                continue
            accepted += 1
            resumed = open_conversation(
                store, make_agent(1, "r"), tmp_path / "ws", copy, visualizer=None
            )
            # Some fields the SDK derives again on reading (a tool's title): the payload it
            # read holds the mark, the event it made of it is the same kind with the same id.
            redacted = store.event(copy, event_id)
            assert redacted is not None and MARK in redacted.payload_json
            (back,) = [e for e in resumed.state.events if e.id == event_id]
            assert type(back).__name__ == redacted.kind, (event_id, paths)
            length = len(resumed.state.events)
            resumed.send_message("Go on.")
            resumed.run()
            assert len(resumed.state.events) >= length + 4, (event_id, paths)
            assert sdk_view(resumed) == store_view(store, copy), (event_id, paths)
            assert store.verify(copy).ok, (event_id, paths)
        assert refused > 10 and accepted > 2 * len(history), (refused, accepted)
