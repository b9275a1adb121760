"""The README and the docs pages: the CLI reference matches the commands, and every code block
runs, twice in a row in the same folder.

How each block runs is said by the marker above it; see ``_readme.py`` for the list. SQL recipe
blocks and the reader-role block run in test_sql_recipes.py, the OpenHands SDK blocks in
tests/openhands/test_readme_example.py.
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from viewstore import AsyncEventStore
from viewstore.cli import cli
from viewstore.store.database.roles import role_names

from ._readme import KINDS, Block, blocks, blocks_of, page_text, pages_with

VENV = Path(sys.prefix)
BIN = Path(sys.executable).parent
ROUNDS = 2  # every runnable block runs twice in a row in the same folder
#: The names the PostgreSQL tutorial gives its role and database, and the server it shows.
PG_NAME = "agent_store"
PG_ADDRESS = "127.0.0.1:5432"
#: Install lines and the two commands another check runs; nothing else may be skipped.
INSTALL = re.compile(
    r"python3(\.12)? -m venv \.venv && \.venv/bin/pip install -e (\.|'\.\[[a-z,]+\]')$"
)
TEST_COMMAND = ".venv/bin/python -m pytest"
BENCHMARKS = ".venv/bin/python -m benchmarks"


def _shell_env(**extra: str) -> dict[str, str]:
    """A reader's shell: the venv's commands on PATH, no viewstore setting inherited."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("VIEWSTORE_")}
    return {**env, "PATH": f"{BIN}{os.pathsep}{env['PATH']}", **extra}


def _run_bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _folder(tmp_path: Path) -> Path:
    """A folder laid out as a clone is: ``.venv`` is the virtualenv running the tests."""
    (tmp_path / ".venv").symlink_to(VENV, target_is_directory=True)
    return tmp_path


def _failed(block: Block, attempt: int, done: subprocess.CompletedProcess[str]) -> str:
    return f"{block.where} (run {attempt})\n{done.stdout}\n{done.stderr}"


def test_every_block_has_a_known_marker() -> None:
    found = blocks()  # asserts a marker above every block
    assert {block.kind for block in found} <= KINDS
    # Only install lines, the test command and the benchmark command are not run here, each
    # because CI or another test runs it.
    for block in blocks_of("skip"):
        for line in block.code.splitlines():
            assert INSTALL.match(line) or line in (TEST_COMMAND, BENCHMARKS), block.where
    skipped = [block.code for block in blocks_of("skip", "README.md")]
    assert f"{TEST_COMMAND}\n" in skipped  # the Development section's, which CI runs
    assert [block.code for block in blocks_of("skip", "docs/benchmarks.md")] == [f"{BENCHMARKS}\n"]
    assert len(blocks_of("recipe")) >= 5
    assert blocks_of("openhands") and blocks_of("postgres-setup")


def test_cli_reference_lists_exactly_the_commands() -> None:
    reference = page_text("docs/cli.md")
    documented = set(re.findall(r"^\| `viewstore ([a-z-]+)", reference, re.M))
    assert documented == set(cli.list_commands(click.Context(cli)))


@pytest.mark.parametrize("page", pages_with("python"))
def test_python_blocks(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for _ in range(ROUNDS):
        for block in blocks_of("python", page):
            exec(compile(block.code, block.where, "exec"), {"__name__": "readme"})


@pytest.mark.parametrize("page", pages_with("bash"))
def test_bash_blocks(page: str, tmp_path: Path) -> None:
    cwd = _folder(tmp_path)
    env = _shell_env()
    for attempt in range(1, ROUNDS + 1):
        for block in blocks_of("bash", page):
            done = _run_bash(block.code, cwd, env)
            assert done.returncode == 0, _failed(block, attempt, done)


def test_sketches_parse_and_call_only_what_the_store_has() -> None:
    """A sketch is not run (it needs FastAPI or a host named db), but its calls on ``store``
    are checked."""
    sketches = blocks_of("sketch")
    assert sketches
    for block in sketches:
        tree = ast.parse(block.code, block.where)
        called = {
            node.func.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "store"
        }
        assert called, f"{block.where}: the sketch uses no store method"
        assert all(callable(getattr(AsyncEventStore, name, None)) for name in called), called


def _parse_command(argv: list[str]) -> None:
    """Parse ``viewstore ARGV`` as the CLI would, down to the subcommand, and run nothing."""
    group: click.Command = cli
    ctx = group.make_context("viewstore", argv)
    while isinstance(group, click.Group):
        # click 8.2 keeps the subcommand's name apart, privately; 8.1 publicly
        protected = getattr(ctx, "_protected_args", None)
        rest = [*(ctx.protected_args if protected is None else protected), *ctx.args]
        name, command, args = group.resolve_command(ctx, rest)
        assert command is not None and name is not None
        ctx = command.make_context(name, args, parent=ctx)
        group = command


def test_cli_sketches_parse() -> None:
    sketches = blocks_of("cli-sketch")
    assert sketches
    for block in sketches:
        for line in block.code.splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            if words[0] == "export":
                continue
            assert words[0] == "viewstore", f"{block.where}: {line}"
            try:
                _parse_command(words[1:])
            except click.ClickException as error:
                pytest.fail(f"{block.where}: {line}: {error.format_message()}")


def test_config_blocks_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from viewstore.ingest.sources import Sources  # noqa: PLC0415

    files = blocks_of("sources-file")
    assert files
    for n, block in enumerate(files):
        for variable in re.findall(r'_env = "(\w+)"', block.code):
            monkeypatch.setenv(variable, "a-key")
        path = tmp_path / f"sources-{n}.toml"
        path.write_text(block.code, encoding="utf-8")
        assert Sources.load(path), block.where
    configs = blocks_of("json")
    assert configs
    for block in configs:
        assert isinstance(json.loads(block.code), dict), block.where
    for block in blocks_of("text"):
        assert block.language == "text", f"{block.where}: a text block is tagged text"


@pytest.fixture
def tutorial_names(pg_admin_engine: Engine) -> Iterator[str]:
    """A name for the tutorial's role and database; both, and the roles the migrations made
    for that database, are dropped afterwards."""
    name = "vs_tutorial_" + secrets.token_hex(4)
    try:
        yield name
    finally:
        with pg_admin_engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            for role in [*role_names(name).values(), name]:
                conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))


@pytest.mark.postgres
def test_postgres_tutorial(pg_server_url: str, tutorial_names: str, tmp_path: Path) -> None:
    """The tutorial from ``createuser`` on: setup once (again: refused, the role exists), then
    its commands twice on the database it made."""
    server = make_url(pg_server_url)
    address = f"{server.host or '127.0.0.1'}:{server.port or 5432}"
    # `sudo -u postgres CMD`: CMD as the server's superuser, here a login over TCP.
    shims = tmp_path / "shims"
    shims.mkdir()
    sudo = shims / "sudo"
    sudo.write_text('#!/bin/sh\n[ "$1" = -u ] && shift 2\nexec "$@"\n', encoding="utf-8")
    sudo.chmod(0o755)
    env = _shell_env(
        PGHOST=server.host or "127.0.0.1",
        PGPORT=str(server.port or 5432),
        PGUSER=server.username or "postgres",
        PGPASSWORD=server.password or "",
        PGDATABASE="postgres",
    )
    env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
    (tmp_path / "work").mkdir()
    cwd = _folder(tmp_path / "work")

    def adapted(block: Block) -> str:
        assert PG_NAME in block.code, block.where
        return block.code.replace(PG_NAME, tutorial_names).replace(PG_ADDRESS, address)

    page = "docs/tutorial-postgresql.md"
    [setup] = blocks_of("postgres-setup", page)
    done = _run_bash(adapted(setup), cwd, env)
    assert done.returncode == 0, _failed(setup, 1, done)
    for attempt in range(1, ROUNDS + 1):
        for block in blocks_of("postgres-bash", page):
            done = _run_bash(adapted(block), cwd, env)
            assert done.returncode == 0, _failed(block, attempt, done)
    again = _run_bash(adapted(setup), cwd, env)
    assert again.returncode != 0 and "already exists" in again.stderr, _failed(setup, 2, again)
    assert not (cwd / "viewstore.db").exists()  # every command went to PostgreSQL
