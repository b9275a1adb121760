"""The README's "Use with the OpenHands SDK" example runs, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from tests.cli._readme import blocks_of

EXAMPLE_URL = '"sqlite:///agents.db"'


def test_readme_openhands_example(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (block,) = blocks_of("openhands")
    assert EXAMPLE_URL in block.code
    monkeypatch.chdir(tmp_path)
    code = block.code.replace(EXAMPLE_URL, repr(db_url))
    exec(compile(code, f"README.md:{block.line}", "exec"), {"__name__": "readme"})
    assert (tmp_path / "workspace").is_dir()
