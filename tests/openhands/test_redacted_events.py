"""A redacted event is still an OpenHands event: the real SDK reads every redacted reference
event back as the same kind with the same id, and a conversation redacted in the store still
resumes through ``open_conversation``; so does a compacted one."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

import openhands.sdk  # noqa: F401 - the SDK package first: its event module imports in order
from openhands.sdk.event import Event as SdkEvent

from tests.openhands._agent import make_agent, sdk_view, store_view
from viewstore import EventStore, parse_event
from viewstore.domain.scrub import COMPACTED, MARK, redacted_payload
from viewstore.openhands import open_conversation


def _reference_events(vectors_dir: Path) -> list[str]:
    lines: list[str] = []
    for path in sorted((vectors_dir / "cases").glob("*.jsonl")):
        lines.extend(path.read_text().splitlines())
    for path in sorted((vectors_dir / "openhands").glob("*/events/*.json")):
        lines.append(path.read_text())
    return lines


def test_the_sdk_reads_every_redacted_reference_event(vectors_dir: Path) -> None:
    lines = _reference_events(vectors_dir)
    assert len(lines) > 10_000
    kinds = set()
    for line in lines:
        event = parse_event(line)
        redacted = redacted_payload(event.payload_json, None)
        back = SdkEvent.model_validate_json(redacted)
        assert (type(back).__name__, back.id) == (event.kind, event.id)
        kinds.add(event.kind)
    assert {"ActionEvent", "ObservationEvent", "MessageEvent", "Condensation"} <= kinds


def test_a_redacted_conversation_resumes_and_goes_on(db_url: str, tmp_path: Path) -> None:
    """Run an agent, redact its first observation's output in the store, then resume it in the
    SDK: it reads the redacted events, its view is the store's, and it runs on."""
    cid = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        conversation = open_conversation(
            store, make_agent(6, "a"), tmp_path / "ws", cid, visualizer=None
        )
        conversation.send_message("Start.")
        conversation.run()
        observed = next(e for e in store.events(cid) if e.kind == "ObservationEvent")
        user = next(e for e in store.events(cid) if e.kind == "MessageEvent")
        store.redact(
            cid, observed.event_id, reason="tool output leaked a key", paths=["/observation"]
        )
        store.redact(cid, user.event_id, reason="the user asked")
        assert store.verify().ok
    with EventStore(db_url) as store:
        resumed = open_conversation(
            store, make_agent(3, "b"), tmp_path / "ws", cid, visualizer=None
        )
        by_id = {event.id: event for event in resumed.state.events}
        assert MARK in by_id[observed.event_id].model_dump_json()
        assert "Start." not in by_id[user.event_id].model_dump_json()
        assert sdk_view(resumed) == store_view(store, cid)
        resumed.send_message("Go on.")
        resumed.run()
        assert sdk_view(resumed) == store_view(store, cid)
        report = store.verify(cid)
        assert report.ok and len([n for n in report.conversations[0].notes if "redacted" in n]) == 2


def test_the_sdk_reads_every_compacted_reference_event(vectors_dir: Path) -> None:
    """Compaction (docs/retention.md) leaves the structure a redaction leaves, with its own
    marker, over a payload a redaction may have touched first."""
    for line in _reference_events(vectors_dir)[::7]:
        event = parse_event(line)
        compacted = redacted_payload(event.payload_json, None, mark=COMPACTED)
        back = SdkEvent.model_validate_json(compacted)
        assert (type(back).__name__, back.id) == (event.kind, event.id)


def test_a_compacted_conversation_resumes_and_goes_on(db_url: str, tmp_path: Path) -> None:
    """Run an agent whose condenser forgets most of it, compact everything every view forgot,
    then resume it in the SDK: the SDK reads the compacted events, its view is the store's
    (untouched by compaction), and it runs on; the next compaction takes what it forgot."""
    cid = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        conversation = open_conversation(
            store, make_agent(12, "a"), tmp_path / "ws", cid, visualizer=None
        )
        conversation.send_message("Start.")
        conversation.run()
        before = store_view(store, cid)
        report = store.compact(older_than=timedelta(0), min_freed=-(10**6))
        assert report.events >= 5, report
        assert store_view(store, cid) == before
        assert store.verify().ok
        compacted = {r.event_id for r in store.redactions(cid) if r.compacted}
    with EventStore(db_url) as store:
        resumed = open_conversation(
            store, make_agent(3, "b"), tmp_path / "ws", cid, visualizer=None
        )
        by_id = {event.id: event for event in resumed.state.events}
        assert all(COMPACTED in by_id[eid].model_dump_json() for eid in compacted)
        assert sdk_view(resumed) == store_view(store, cid) == before
        resumed.send_message("Go on.")
        resumed.run()
        assert sdk_view(resumed) == store_view(store, cid)
        assert store.compact(older_than=timedelta(0), min_freed=-(10**6)).events >= 1
        assert sdk_view(resumed) == store_view(store, cid)
        assert store.verify(cid).ok
