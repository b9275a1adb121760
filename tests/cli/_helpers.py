"""Shared helpers for the CLI tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result

from viewstore.cli import cli

Completed = subprocess.CompletedProcess[str]
OPENHANDS_HEX = "5a3b1e00000040008000000000000001"


def invoke(url: str, *args: str, input: str | None = None) -> Result:
    """Run ``viewstore --url URL ARGS...`` in-process; unexpected exceptions propagate."""
    return CliRunner().invoke(cli, ["--url", url, *args], input=input, catch_exceptions=False)


def one_line_error(result: Result) -> str:
    """The stderr of a user error: exactly one line, no traceback."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    assert lines[0].startswith("error: ")
    return lines[0]


def event_files(folder: Path) -> list[Path]:
    return sorted((folder / "events").glob("event-*.json"))


def run_viewstore(url: str, *args: str, cwd: Path | None = None) -> Completed:
    """The installed ``viewstore`` command in a subprocess, as a user runs it."""
    script = Path(sys.executable).parent / "viewstore"
    env = {k: v for k, v in os.environ.items() if k != "VIEWSTORE_URL"}
    return subprocess.run(
        [str(script), "--url", url, *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def failed_with_one_line(done: Completed) -> str:
    """A user error of the real command: exit 2, nothing on stdout, one line on stderr (no
    traceback); that line without its ``error: `` prefix."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0].removeprefix("error: ")
