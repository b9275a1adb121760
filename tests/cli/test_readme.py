"""The README: its CLI reference matches the commands, and its code blocks run.

How each block runs is said by the marker above it; see ``_readme.py`` for the list. SQL recipe
blocks and the reader-role block run in test_sql_recipes.py.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from viewstore import AsyncEventStore
from viewstore.cli import cli

from ._readme import KINDS, blocks, blocks_of, section

BIN = Path(sys.executable).parent
EXAMPLE_PG_URL = "postgresql://viewstore@127.0.0.1:5432/viewstore"


def _run_bash(script: str, cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VIEWSTORE_URL": url, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_block_has_a_known_marker() -> None:
    found = blocks()  # asserts a marker above every block
    assert {block.kind for block in found} <= KINDS
    # Only two blocks are not run here, each because another check runs it: the Quick start
    # (CI runs its test command; .ci/run must say the same) and the benchmark command
    # (tests/test_benchmarks.py runs the same suite with --quick).
    quick_start, benchmarks = blocks_of("skip")
    assert quick_start.code.splitlines()[1] == ".venv/bin/python -m pytest"
    assert benchmarks.code.strip() == ".venv/bin/python -m benchmarks"
    assert len(blocks_of("recipe")) >= 5


def test_cli_reference_lists_exactly_the_commands() -> None:
    reference = section("CLI reference")
    documented = set(re.findall(r"^\| `viewstore ([a-z-]+)", reference, re.M))
    assert documented == set(cli.list_commands(click.Context(cli)))


def test_python_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for block in blocks_of("python"):
        exec(compile(block.code, f"README.md:{block.line}", "exec"), {"__name__": "readme"})


def test_sketches_parse_and_call_only_what_the_store_has() -> None:
    """A sketch is not run (it needs FastAPI), but its calls on ``store`` are checked."""
    sketches = blocks_of("sketch")
    assert sketches
    for block in sketches:
        tree = ast.parse(block.code, f"README.md:{block.line}")
        called = {
            node.func.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "store"
        }
        assert called, f"README.md:{block.line}: the sketch uses no store method"
        assert all(callable(getattr(AsyncEventStore, name, None)) for name in called), called


def test_bash_blocks_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'readme.db'}"
    for block in blocks_of("bash"):
        done = _run_bash(block.code, tmp_path, url)
        assert done.returncode == 0, f"README.md:{block.line}\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "exported" / "demo" / "base_state.json").is_file()


@pytest.mark.postgres
def test_postgres_bash_blocks(fresh_pg_url: str, tmp_path: Path) -> None:
    for block in blocks_of("postgres-bash"):
        assert EXAMPLE_PG_URL in block.code
        script = block.code.replace(EXAMPLE_PG_URL, fresh_pg_url)
        done = _run_bash(script, tmp_path, "sqlite:///unused.db")
        assert done.returncode == 0, f"README.md:{block.line}\n{done.stdout}\n{done.stderr}"
        assert not (tmp_path / "unused.db").exists()
