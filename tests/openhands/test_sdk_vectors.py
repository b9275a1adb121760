"""The installed OpenHands SDK still gives the reference vectors' outputs (docs/semantics.md).

The vectors were made with openhands-sdk 1.57.0; viewstore reproduces them exactly
(tests/view/test_vectors.py). This runs every stream of tests/data/vectors through the SDK that
is installed, its own ``View``, on both paths: the live path (``append_event`` per event, the
state after every append) and the resume path (``View.from_events`` of the whole stream, and of
every prefix where the vectors hold it). CI runs it on each supported SDK version, so a release
that changes the semantics fails here before anything else relies on it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

import openhands.sdk  # noqa: F401 - the SDK package first: its event module imports in order
from openhands.sdk.context.view import View as SdkView
from openhands.sdk.event import Event as SdkEvent

from tests.view._helpers import digest
from viewstore.openhands import sdk_internals

VECTORS = Path(__file__).resolve().parents[1] / "data" / "vectors"
STREAMS = sorted((VECTORS / "cases").glob("*.jsonl")) + sorted((VECTORS / "micro").glob("*.jsonl"))


def _state(view: SdkView) -> list[Any]:
    ids = [event.id for event in view.events]
    return digest(ids, view.manipulation_indices, view.unhandled_condensation_request)


def _read(stream: Path) -> tuple[list[SdkEvent], dict[str, Any]]:
    lines = [line for line in stream.read_text(encoding="utf-8").splitlines() if line.strip()]
    expected_path = stream.with_name(stream.name.replace(".jsonl", ".expected.json"))
    expected: dict[str, Any] = json.loads(expected_path.read_text(encoding="utf-8"))
    return [SdkEvent.model_validate_json(line) for line in lines], expected


def test_the_installed_sdk_is_a_supported_one() -> None:
    assert sdk_internals.SDK_VERSION.rpartition(".")[0] in sdk_internals.SUPPORTED


@pytest.mark.parametrize("stream", STREAMS, ids=[p.stem for p in STREAMS])
def test_the_sdk_gives_the_vectors_outputs(stream: Path) -> None:
    events, expected = _read(stream)
    assert len(events) == expected["n_events"]

    live = SdkView()
    after_each = []
    for event in events:
        live.append_event(event)
        after_each.append(_state(live))
    assert after_each == expected["prefix_digests"], sdk_internals.SDK_VERSION
    incremental = expected["incremental"]
    assert [e.id for e in live.events] == incremental["view_ids"]
    assert sorted(live.manipulation_indices) == incremental["manipulation_indices"]

    resumed = SdkView.from_events(events)
    assert [e.id for e in resumed.events] == expected["view_ids"]
    assert sorted(resumed.manipulation_indices) == expected["manipulation_indices"]
    assert resumed.unhandled_condensation_request is expected["unhandled_condensation_request"]

    if "prefix_digests_from_events" in expected:
        every_prefix = [_state(SdkView.from_events(events[: n + 1])) for n in range(len(events))]
        assert every_prefix == expected["prefix_digests_from_events"]
