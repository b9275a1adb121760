"""The reference vectors: every output the real openhands-sdk 1.57.0 gave, checked exactly.

For each stream (``cases/NNN.jsonl`` and ``micro/mNN_*.jsonl``) the expected file gives

* the resume path, ``View.from_events(stream)``: view ids, request flag, manipulation indices
  and the enforcement rounds (which property removed which ids);
* the live path, ``append_event`` per event: the final state, a digest after every append
  (``prefix_digests``) and, for micro cases, the full ids and indices after every append;
* ``View.from_events`` of every prefix (short streams only);
* the cold load over the active branch (docs/semantics.md §9).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from viewstore.domain.events import Event, parse_event
from viewstore.domain.view import View, active_branch, full_indices

from ._helpers import read_expected, read_stream, rounds, view_digest

VECTORS = Path(__file__).resolve().parents[1] / "data" / "vectors"
STREAMS = sorted((VECTORS / "cases").glob("*.jsonl")) + sorted((VECTORS / "micro").glob("*.jsonl"))
OPENHANDS_FOLDERS = sorted(p for p in (VECTORS / "openhands").iterdir() if p.is_dir())


def _expected(stream: Path) -> dict[str, Any]:
    return read_expected(stream.with_name(stream.name.replace(".jsonl", ".expected.json")))


@functools.cache
def _load(stream: Path) -> tuple[tuple[Event, ...], dict[str, Any]]:
    """Parsed once per session: events are frozen, and the tests only read the expectations."""
    events = tuple(read_stream(stream))
    expected = _expected(stream)
    assert len(events) == expected["n_events"]
    return events, expected


SHORT_STREAMS = [p for p in STREAMS if "prefix_digests_from_events" in _load(p)[1]]


def test_every_vector_is_collected(vectors_dir: Path) -> None:
    assert vectors_dir.resolve() == VECTORS
    assert len(STREAMS) == 100 + 37
    assert len(SHORT_STREAMS) == 137 - 16
    assert len(OPENHANDS_FOLDERS) == 1


@pytest.fixture(params=STREAMS, ids=[p.stem for p in STREAMS])
def vector(request: pytest.FixtureRequest) -> tuple[list[Event], dict[str, Any]]:
    events, expected = _load(request.param)
    return list(events), expected


def test_resume_path(vector: tuple[list[Event], dict[str, Any]]) -> None:
    events, expected = vector
    view = View.from_events(events)

    assert view.event_ids == expected["view_ids"]
    assert view.unhandled_condensation_request is expected["unhandled_condensation_request"]
    assert sorted(view.manipulation_indices) == expected["manipulation_indices"]
    assert rounds(view) == [(r["property"], sorted(r["removed"])) for r in expected["enforcement"]]


def test_live_path(vector: tuple[list[Event], dict[str, Any]]) -> None:
    """After every append: the digest, the full prefix (micro) and indices == full rescan."""
    events, expected = vector
    prefixes = expected.get("prefixes")
    view = View()
    digests = []
    for n, event in enumerate(events):
        view.append_event(event)
        digests.append(view_digest(view))
        assert view.manipulation_indices == full_indices(view.events), f"after event #{n}"
        if prefixes is not None:
            assert {
                "view_ids": view.event_ids,
                "manipulation_indices": sorted(view.manipulation_indices),
                "unhandled_condensation_request": view.unhandled_condensation_request,
            } == prefixes[n], f"after event #{n}"

    assert digests == expected["prefix_digests"]
    incremental = expected["incremental"]
    assert view.event_ids == incremental["view_ids"]
    assert sorted(view.manipulation_indices) == incremental["manipulation_indices"]
    assert view.unhandled_condensation_request is incremental["unhandled_condensation_request"]


@pytest.mark.parametrize("stream", SHORT_STREAMS, ids=[p.stem for p in SHORT_STREAMS])
def test_from_events_of_every_prefix(stream: Path) -> None:
    """Streams of at most 300 events: the resume path of every prefix (it is not monotone)."""
    events, expected = _load(stream)
    got = [view_digest(View.from_events(events[: n + 1])) for n in range(len(events))]
    assert got == expected["prefix_digests_from_events"]


def test_active_branch(vector: tuple[list[Event], dict[str, Any]]) -> None:
    """Cold load: ``from_events`` over the parent chain from HEAD; result fields in the vector
    are present only where they differ from the resume path."""
    events, expected = vector
    branch_expected = expected["active_branch"]
    branch = active_branch(events, branch_expected.get("leaf_event_id"), False)
    assert len(branch) == branch_expected["n_branch_events"]

    view = View.from_events(branch)
    assert view.event_ids == branch_expected.get("view_ids", expected["view_ids"])
    assert sorted(view.manipulation_indices) == branch_expected.get(
        "manipulation_indices", expected["manipulation_indices"]
    )
    assert view.unhandled_condensation_request is branch_expected.get(
        "unhandled_condensation_request", expected["unhandled_condensation_request"]
    )
    differs = any(k in branch_expected for k in ("view_ids", "manipulation_indices"))
    assert branch_expected["same_as_from_events"] is not differs


def test_m09_cold_load_drops_state_updates_from_the_branch(vectors_dir: Path) -> None:
    """m09 vs m30: the same stream, tree-stamped or legacy. On the tree the state update is a
    leaf off the chain, so the branch is the stream minus it, and the loop {A*1,O1,A2,O2} is
    whole for enforcement; in the legacy log the branch is the whole log, X included."""
    m09 = read_stream(vectors_dir / "micro" / "m09_csue_splits_tool_loop.jsonl")
    m30 = read_stream(vectors_dir / "micro" / "m30_legacy_csue_splits_tool_loop.jsonl")
    tree_branch = active_branch(m09, m09[-1].id)
    assert [e.kind for e in m09 if e not in tree_branch] == ["ConversationStateUpdateEvent"]
    assert active_branch(m30) == m30  # legacy: HEAD is the last event, parents implicit
    assert View.from_events(tree_branch).event_ids == [m09[0].id, m09[1].id]
    assert View.from_events(m30).event_ids == [e.id for e in m30[:2] + m30[5:7]]


# --------------------------------------------------------------------------- openhands folder


def _read_folder(folder: Path) -> tuple[list[Event], dict[str, Any]]:
    files = sorted(
        (folder / "events").glob("event-*.json"), key=lambda p: int(p.name.split("-")[1])
    )
    assert [int(p.name.split("-")[1]) for p in files] == list(range(len(files)))
    events = [parse_event(p.read_bytes()) for p in files]
    for path, event in zip(files, events, strict=True):
        assert path.name == f"event-{int(path.name.split('-')[1]):05d}-{event.id}.json"
    base_state = json.loads((folder / "base_state.json").read_text(encoding="utf-8"))
    return events, base_state


@pytest.mark.parametrize("folder", OPENHANDS_FOLDERS, ids=[p.name for p in OPENHANDS_FOLDERS])
def test_openhands_conversation_folder(folder: Path) -> None:
    expected = read_expected(folder.with_name(folder.name + ".expected.json"))
    events, base_state = _read_folder(folder)
    assert len(events) == expected["n_events"]

    # Cold load, exactly as the SDK does it: the active branch from base_state's HEAD.
    branch = active_branch(
        events, base_state.get("leaf_event_id"), bool(base_state.get("head_is_empty", False))
    )
    assert len(branch) == expected["active_branch"]["n_branch_events"]
    cold = View.from_events(branch)
    assert cold.event_ids == expected["cold_load_state_view_ids"]
    assert cold.event_ids == expected["view_ids"]
    assert sorted(cold.manipulation_indices) == expected["manipulation_indices"]
    assert cold.unhandled_condensation_request is expected["unhandled_condensation_request"]

    # The live fold over the files in index order.
    view = View()
    digests = []
    for event in events:
        view.append_event(event)
        digests.append(view_digest(view))
    assert digests == expected["prefix_digests"]
    incremental = expected["incremental"]
    assert view.event_ids == incremental["view_ids"]
    assert sorted(view.manipulation_indices) == incremental["manipulation_indices"]
    assert view.unhandled_condensation_request is incremental["unhandled_condensation_request"]
