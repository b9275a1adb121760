"""The docs' OpenHands SDK examples run, on SQLite and PostgreSQL, twice in a row in the same
folder: each page's ``openhands`` Python blocks in one process, its ``openhands-bash`` blocks
after them (tests/cli/_readme.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from tests.cli._readme import blocks, pages_with

EXAMPLE_URL = "sqlite:///agents.db"
ROUNDS = 2


@pytest.mark.parametrize("page", pages_with("openhands"))
def test_openhands_examples(
    page: str, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runnable = [block for block in blocks(page) if block.kind in ("openhands", "openhands-bash")]
    assert any(EXAMPLE_URL in block.code for block in runnable)
    env = {key: value for key, value in os.environ.items() if not key.startswith("VIEWSTORE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for attempt in range(1, ROUNDS + 1):
        for block in runnable:
            # Every example of the page shares one store: the test's database.
            code = block.code.replace(f'"{EXAMPLE_URL}"', repr(db_url))
            code = code.replace(EXAMPLE_URL, db_url)
            if block.kind == "openhands":
                exec(compile(code, block.where, "exec"), {"__name__": "readme"})
                continue
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                check=False,
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            failed = f"{block.where} (run {attempt})\n{done.stdout}\n{done.stderr}"
            assert done.returncode == 0, failed
    assert (tmp_path / "workspace").is_dir()
