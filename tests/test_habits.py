"""Habits of the ecosystem: the version, the licence, logging under ``viewstore`` (silent by
default), imports on first use, and SQLite without the PostgreSQL driver (or the asyncio store
without its extra)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import viewstore
from viewstore import ConcurrencyError, EventStore, append_with_retry

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_version_matches_the_package_metadata() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert viewstore.__version__ == project["version"]
    from importlib.metadata import version  # noqa: PLC0415

    assert version("viewstore") == viewstore.__version__


def test_licence_file_is_the_mit_licence_the_metadata_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "Permission is hereby granted, free of charge" in text


def test_every_public_name_resolves() -> None:
    for name in viewstore.__all__:
        assert getattr(viewstore, name) is not None, name
    assert viewstore.create_engine is viewstore.store.database.engine.create_engine_for
    with pytest.raises(AttributeError):
        viewstore.no_such_name  # noqa: B018


def test_importing_viewstore_imports_no_database_or_validation_library() -> None:
    done = _python(
        "import sys, viewstore, viewstore.cli; "
        "print([m for m in ('sqlalchemy', 'pydantic', 'rich', 'alembic') if m in sys.modules])"
    )
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_logging_is_silent_by_default(sqlite_url: str) -> None:
    code = f"""
from viewstore import EventStore, ConcurrencyError
store = EventStore({sqlite_url!r})
store.create_schema()
store.append("c", {{"kind": "MessageEvent", "id": "m1"}})
try:
    store.append("c", {{"kind": "MessageEvent", "id": "m2"}}, expected_version=0)
except ConcurrencyError:
    pass
"""
    done = _python(code)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_conflicts_retries_fallbacks_and_migrations_are_logged(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="viewstore")
    with EventStore(sqlite_url) as store, EventStore(sqlite_url) as other:
        store.create_schema()
        store.append("c", {"kind": "MessageEvent", "id": "m1"})
        other.append("c", {"kind": "MessageEvent", "id": "m2"})  # store's tail is stale now
        store.append("c", {"kind": "MessageEvent", "id": "m3"})
        with pytest.raises(ConcurrencyError):
            store.append("c", {"kind": "MessageEvent", "id": "m4"}, expected_version=1)
        seen: list[int] = []

        def decide(view: object) -> object:
            if not seen:  # the first decision loses a race to another writer
                other.append("c", {"kind": "MessageEvent", "id": f"race-{len(seen)}"})
            seen.append(1)
            return {"kind": "MessageEvent", "id": f"d{len(seen)}"}

        append_with_retry(store, "c", decide, backoff=0)
    by_logger = {(r.name, r.levelname): r.getMessage() for r in caplog.records}
    migrated = by_logger[("viewstore.migrations", "DEBUG")]
    assert "migrated the viewstore schema from empty to" in migrated
    assert "fast path stepped aside for 'c'" in by_logger[("viewstore.store", "DEBUG")]
    assert "conflict on 'c'" in by_logger[("viewstore.store", "INFO")]
    assert "retrying 'c' after a conflict (attempt 1" in by_logger[("viewstore.retry", "INFO")]


def test_slow_statements_are_logged_from_the_threshold(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("VIEWSTORE_SLOW_MS", "0")  # every statement counts as slow
    caplog.set_level(logging.WARNING, logger="viewstore.sql")
    with EventStore(sqlite_url) as store:
        store.create_schema()
        store.append("c", {"kind": "MessageEvent", "id": "m1"})
        store.append("c", {"kind": "MessageEvent", "id": "m2"})  # the fast path
    messages = [r.getMessage() for r in caplog.records if r.name == "viewstore.sql"]
    assert any(m.startswith("slow statement (") and "INSERT INTO events" in m for m in messages)
    assert any(m.endswith("fast-path append") for m in messages)
    caplog.clear()
    monkeypatch.setenv("VIEWSTORE_SLOW_MS", "60000")
    with EventStore(sqlite_url) as store:
        store.append("c", {"kind": "MessageEvent", "id": "m3"})
    assert [r for r in caplog.records if r.name == "viewstore.sql"] == []


_NO_PSYCOPG = "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_binary'] = None\n"


def test_sqlite_needs_nothing_of_the_postgres_driver(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nopg.db'}"
    code = (
        _NO_PSYCOPG
        + f"""
import json
from viewstore import EventStore
with EventStore({url!r}) as store:
    store.create_schema()
    store.append("c", {{"kind": "MessageEvent", "id": "m1"}})
    store.append("c", {{"kind": "MessageEvent", "id": "m2"}})
    print(json.dumps([store.view("c").event_ids, store.verify().ok]))
"""
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["m1", "m2"], True]


def test_a_postgres_url_without_the_driver_says_which_extra_to_install() -> None:
    code = (
        _NO_PSYCOPG
        + """
from viewstore import EventStore, UnsupportedDatabaseError
try:
    EventStore("postgresql://u@127.0.0.1/db")
except UnsupportedDatabaseError as error:
    print(error)
"""
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert "the driver for 'postgresql+psycopg' URLs is not installed" in done.stdout
    assert "pip install -e '.[postgres]' (in a clone)" in done.stdout


def test_the_asyncio_store_without_its_extra_says_which_extra_to_install() -> None:
    code = """
import sys
sys.modules["greenlet"] = None  # as if the asyncio extra were not installed
try:
    from viewstore import AsyncEventStore
except ImportError as error:
    from viewstore import MissingExtraError
    print(type(error).__name__, isinstance(error, MissingExtraError), error.extra)
    print(error)
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    kind, message = done.stdout.splitlines()
    assert kind == "MissingExtraError True asyncio"
    assert "pip install -e '.[asyncio]' in a clone" in message
    assert "sqlalchemy[asyncio]" not in message


def test_code_cites_only_documents_inside_the_repository() -> None:
    """Docstrings point at docs/, and every section they name is there."""
    import re  # noqa: PLC0415

    sources = [
        path
        for folder in ("viewstore", "tests", "benchmarks", "migrations")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".md")
        and "__pycache__" not in path.parts
        and path != Path(__file__).resolve()
    ]
    headings = {
        name: set(re.findall(r"^## (\d+)\.", (ROOT / "docs" / name).read_text(), re.M))
        for name in ("semantics.md",)
    }
    cited = 0
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for outside in ("SEMANTICS.md", "DESIGN.md", "AGENTS.md", "STYLE.md"):
            assert outside not in text, f"{path} cites {outside}"
        for name, sections in re.findall(r"docs/([a-z]+\.md)((?: ?§[\d.]+,?(?: and)?)*)", text):
            assert (ROOT / "docs" / name).is_file(), f"{path} cites docs/{name}"
            for section in re.findall(r"§(\d+)", sections):
                assert section in headings[name], f"{path} cites docs/{name} §{section}"
            cited += 1
    assert cited > 20
