"""CI and the README must run the same test command."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_COMMAND = ".venv/bin/python -m pytest"


def test_readme_and_ci_run_the_same_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f"\n{TEST_COMMAND}\n" in readme
    assert any(line.strip().startswith(TEST_COMMAND) for line in ci.splitlines())
    assert "set -euo pipefail" in ci
