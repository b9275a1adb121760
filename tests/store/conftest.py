"""Fixtures for the store contract suite (helpers live in ``_helpers.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from viewstore import EventStore


@pytest.fixture
def store(db_url: str) -> Iterator[EventStore]:
    """An EventStore on a fresh database of each backend, migrated to head."""
    with EventStore(db_url) as opened:
        opened.create_schema()
        yield opened
