"""The docs' store-backed agent server examples (``agent-server-bash`` blocks) run, twice in a
row in the same folder, with this virtualenv's ``python`` and ``viewstore`` first on PATH and
the example's port replaced by a free one (tests/cli/_readme.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openhands.agent_server", reason="openhands.agent_server is not importable")

from tests.cli._readme import blocks_of, pages_with

from ..ingest._fleet import free_port

EXAMPLE_PORT = "8011"


@pytest.mark.slow
@pytest.mark.parametrize("page", pages_with("agent-server-bash"))
def test_agent_server_examples(page: str, tmp_path: Path) -> None:
    runnable = blocks_of("agent-server-bash", page)
    assert all(EXAMPLE_PORT in block.code for block in runnable)
    env = {key: value for key, value in os.environ.items() if not key.startswith("VIEWSTORE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    outputs = []
    for attempt in (1, 2):
        for block in runnable:
            code = block.code.replace(EXAMPLE_PORT, str(free_port()))
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                check=False,
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            log = tmp_path / "server.log"
            failed = f"{block.where} (run {attempt})\n{done.stdout}\n{done.stderr}\n" + (
                log.read_text()[-3000:] if log.exists() else ""
            )
            assert done.returncode == 0, failed
            outputs.append(done.stdout)
    assert outputs[0].strip().endswith("0")  # a new store holds no conversation
