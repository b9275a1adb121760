"""The README's test command on a machine with PostgreSQL's binaries and no URL: each test
process starts a throwaway server and its PostgreSQL tests run on it (tests/_throwaway_pg.py);
and the summary says each kind of skip once, with its count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._throwaway_pg import binaries

ROOT = Path(__file__).resolve().parent.parent


def _pytest(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_postgres_tests_run_on_a_throwaway_server_without_a_url() -> None:
    if binaries() is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl) on this machine")
    env = {k: v for k, v in os.environ.items() if k != "VIEWSTORE_TEST_POSTGRES_URL"}
    env["VIEWSTORE_REQUIRE_POSTGRES"] = "1"  # a skip would fail the run
    # Two workers: each runs its tests on a server of its own.
    run = _pytest("tests/test_backends.py", "-n", "2", "-q", env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "PostgreSQL tests ran on throwaway servers" in run.stdout
    assert "skipped" not in run.stdout.strip().splitlines()[-1]
    folders = set(re.findall(r"(/\S*viewstore-test-pg-\w+)", run.stdout))
    assert len(folders) == 2, run.stdout[-2000:]
    # Stopped and removed with the session.
    assert not any(Path(folder).exists() for folder in folders)


def test_each_kind_of_skip_is_one_summary_line(tmp_path: Path) -> None:
    module = tmp_path / "test_skips.py"
    module.write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('n', range(3))\n"
        "def test_needs_a_thing(n):\n"
        "    pytest.skip('the thing is missing')\n"
        "def test_needs_another():\n"
        "    pytest.skip('another thing is missing')\n"
    )
    env = {**os.environ}
    # The module lives outside tests/: it is given the root conftest as a plugin.
    run = _pytest(str(module), "-n", "0", "-p", "tests.conftest", "--rootdir", str(ROOT), env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert sum("skipped: the thing is missing" in line for line in lines) == 1
    assert any(line.split() == ["3", "skipped:", "the", "thing", "is", "missing"] for line in lines)
    assert sum("skipped: another thing is missing" in line for line in lines) == 1
