"""Shared helpers for the CLI tests (fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from viewstore.cli import cli

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
