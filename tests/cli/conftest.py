"""Fixtures for the CLI, import/export and SQL recipe tests."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from viewstore import EventStore
from viewstore.demo import run_demo
from viewstore.importers.openhands import ConversationFolder, read_events

from ._helpers import OPENHANDS_HEX


@pytest.fixture
def openhands_folder(vectors_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the SDK-written conversation folder (tests may damage it)."""
    target = tmp_path / "conversations" / OPENHANDS_HEX
    shutil.copytree(vectors_dir / "openhands" / OPENHANDS_HEX, target)
    return target


@pytest.fixture
def openhands_expected(vectors_dir: Path) -> dict[str, Any]:
    path = vectors_dir / "openhands" / f"{OPENHANDS_HEX}.expected.json"
    value: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return value


@pytest.fixture
def populated_store(db_url: str, vectors_dir: Path) -> Iterator[EventStore]:
    """A store holding the demo conversation ``demo`` and the SDK-written conversation."""
    store = EventStore(db_url)
    try:
        run_demo(store, "demo")
        folder = ConversationFolder(OPENHANDS_HEX, vectors_dir / "openhands" / OPENHANDS_HEX)
        store.append(OPENHANDS_HEX, read_events(folder))
        yield store
    finally:
        store.close()
