"""A skip that CI refuses fails the session on several xdist workers too: the controller, which
collects nothing and loads no folder's conftest, still sees the skips (tests/_required.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REQUIRE = "VIEWSTORE_REQUIRE_AGENT_SERVER"


def _run(required: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != REQUIRE}
    if required:
        env[REQUIRE] = "1"
    # test_protocol.py runs anywhere: without it the session would end "no tests ran" (5).
    modules = ["tests/ingest/test_fleet.py", "tests/ingest/test_protocol.py"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *modules, "-n", "2", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing (no openhands at all)
        return False


def test_a_required_folder_that_skips_fails_on_two_workers() -> None:
    if _installed("openhands.agent_server"):
        pytest.skip("the agent server is installed here: tests/ingest/test_fleet.py would run")
    refused = _run(required=True)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"skipped while {REQUIRE}=1: tests/ingest/test_fleet.py" in refused.stdout
    allowed = _run(required=False)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "passed, 1 skipped" in allowed.stdout
