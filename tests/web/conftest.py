"""Fixtures for the viewer: a populated store on each backend and a TestClient over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from viewstore import EventStore
from viewstore.web import create_app

from ._data import Browsed, populate


@pytest.fixture
def browsed(db_url: str) -> Browsed:
    with EventStore(db_url) as store:
        return populate(store)


@pytest.fixture
def client(db_url: str, browsed: Browsed) -> Iterator[TestClient]:
    with TestClient(create_app(db_url)) as opened:
        yield opened
