"""Creating or migrating a store logs nothing at INFO: an application that logs at INFO (the
OpenHands SDK does) would otherwise print Alembic's forty lines each time it opens a store
(docs/operations.md, "Logging"). Alembic run by the application itself still logs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from viewstore import EventStore


def _loud(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        f"{record.name}: {record.getMessage()}"
        for record in caplog.records
        if record.levelno >= logging.INFO
    ]


def test_create_schema_on_a_new_file_logs_nothing_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger: every record of every logger
    path = tmp_path / "fresh.db"
    with EventStore(f"sqlite:///{path}") as store:
        store.create_schema()
        head = store.schema_revision()
        store.create_schema()  # at head already
    assert path.stat().st_size > 0 and head is not None
    assert _loud(caplog) == []
    # The store's own line about it is there, at DEBUG, for whoever asks for it.
    assert any(record.name == "viewstore.migrations" for record in caplog.records)


def test_alembic_outside_the_store_keeps_its_info_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with EventStore(f"sqlite:///{tmp_path / 'fresh.db'}") as store:
        store.create_schema()
    # The application's own migrations log through the same loggers, after the store's ran.
    logging.getLogger("alembic.runtime.migration").info("Running upgrade  -> app_0001")
    assert _loud(caplog) == ["alembic.runtime.migration: Running upgrade  -> app_0001"]
