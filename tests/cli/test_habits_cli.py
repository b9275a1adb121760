"""The command line as command-line tools behave: `--version`, a `--help` that imports no
database library, a closed pipe, helpful `append` errors, read commands that create no file,
`append` and `import` that create a whole store or none, a `serve` that cannot listen, and a
demo that keeps out of other applications' databases. Each runs the installed command."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from sqlalchemy import create_engine, text

import viewstore
from viewstore.cli.app import CREATING_COMMANDS, DEFAULT_URL, LAZY_COMMANDS, SHORT_HELP, cli
from viewstore.demo import run_demo
from viewstore.store.database import engine

from ._helpers import OPENHANDS_HEX
from ._process import SCRIPT, clean_env, error_line, run


def test_version() -> None:
    done = run("--version")
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"viewstore, version {viewstore.__version__}\n",
        "",
    )


def test_help_lists_every_command_without_importing_them() -> None:
    code = (
        "import sys; from viewstore.cli import main; sys.argv = ['viewstore', '--help']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "heavy = ('sqlalchemy', 'rich', 'pydantic', 'alembic', 'viewstore.cli.commands')\n"
        "print('LOADED', [m for m in heavy if m in sys.modules], code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED [] 0"
    for name, (_module, short) in LAZY_COMMANDS.items():
        assert f"  {name} " in done.stdout and short in done.stdout


#: What appending needs and reading does not: the events model (pydantic), the projector and
#: the view engine, the row writers, Alembic (viewstore.store.event_store says why).
_APPEND_MACHINERY = (
    "pydantic",
    "alembic",
    "viewstore.domain.events",
    "viewstore.domain.projector",
    "viewstore.domain.view",
    "viewstore.store.append.rows",
    "viewstore.store.append.fast_path",
    "viewstore.store.append.batch",
)


def test_read_commands_import_none_of_the_append_machinery(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'reads.db'}"
    store = viewstore.EventStore(url)
    try:
        run_demo(store, "demo")
    finally:
        store.close()
    reads = [
        ["list"],
        ["stats"],
        ["view", "demo"],
        ["view", "demo", "--as-of", "3", "--json"],
        ["indices", "demo"],
        ["events", "demo"],
        ["checkpoint"],
        ["feed"],
    ]
    code = (
        "import json, sys\nfrom viewstore.cli import main\n"
        f"heavy = {_APPEND_MACHINERY!r}\nloaded = {{}}\n"
        f"for args in {reads!r}:\n"
        f"    sys.argv = ['viewstore', '--url', {url!r}, *args]\n"
        "    try:\n        main()\n"
        "    except SystemExit as e:\n        assert not e.code, (args, e.code)\n"
        "    loaded[' '.join(args)] = [m for m in heavy if m in sys.modules]\n"
        "print('LOADED', json.dumps(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1].removeprefix("LOADED "))
    assert loaded == {" ".join(args): [] for args in reads}


def test_the_lazy_command_table_matches_the_commands() -> None:
    ctx = click.Context(cli)
    for name, (module, short) in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.callback is not None
        assert command.callback.__module__ == f"viewstore.cli.{module}"
        assert command.get_short_help_str(limit=SHORT_HELP) == short
    assert set(cli.commands) == set(LAZY_COMMANDS)  # every command is in the table
    assert DEFAULT_URL == engine.DEFAULT_URL


def test_a_closed_pipe_ends_quietly_with_success(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pipe.db'}"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; '{SCRIPT}' --url '{url}' demo | head -1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=clean_env(),
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("demo conversation ")
    many = subprocess.run(
        ["bash", "-c", f"set -o pipefail; '{SCRIPT}' --url '{url}' feed | head -2"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=clean_env(),
    )
    assert (many.returncode, many.stderr, len(many.stdout.splitlines())) == (0, "", 2)


def _init(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert run("init", url=url).returncode == 0
    return url


def test_append_of_pretty_printed_json_says_one_object_per_line(tmp_path: Path) -> None:
    url = _init(tmp_path)
    pretty = tmp_path / "event.json"
    pretty.write_text(json.dumps({"kind": "MessageEvent", "id": "m1"}, indent=2))
    line = error_line(run("append", "c", str(pretty), url=url))
    assert "one event object per line (JSONL)" in line and "jq -c ." in line
    array = tmp_path / "events.json"
    array.write_text(json.dumps([{"kind": "MessageEvent", "id": "m1"}], indent=1))
    line = error_line(run("append", "c", str(array), url=url))
    assert "a JSON array" in line and "jq -c '.[]'" in line
    assert "not found" in error_line(run("view", "c", url=url))  # nothing was appended


def test_append_batch_errors_name_the_line_and_the_event_id(tmp_path: Path) -> None:
    url = _init(tmp_path)
    lines = [
        "",
        json.dumps({"kind": "MessageEvent", "id": "m1"}),
        json.dumps({"kind": "MessageEvent", "id": "m2"}),
        json.dumps({"kind": "MessageEvent", "id": "m1", "extra": 1}),
    ]
    done = run("append", "c", "-", url=url, input="\n".join(lines) + "\n")
    line = error_line(done)
    assert line.startswith("error: <stdin>: line 4 (event id 'm1'): "), line
    stored = run("append", "c", "-", url=url, input=lines[1] + "\n")
    assert stored.returncode == 0
    changed = json.dumps({"kind": "MessageEvent", "id": "m1", "text": "other"})
    line = error_line(run("append", "c", "-", url=url, input=lines[2] + "\n" + changed + "\n"))
    assert line.startswith("error: <stdin>: line 2 (event id 'm1'): "), line


def test_append_of_an_empty_file_is_an_error(tmp_path: Path) -> None:
    url = _init(tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    line = error_line(run("append", "c", str(empty), url=url))
    assert "no events" in line
    assert "not found" in error_line(run("view", "c", url=url))


#: Every command but those that may create a store (CREATING_COMMANDS), with arguments that
#: get it past its own checks to the store.
NEEDS_A_STORE: dict[str, list[str]] = {
    "checkpoint": [],
    "citus": ["distribute", "--print"],
    "compact": ["--older-than", "1d", "--dry-run"],
    "masking": ["list", "c"],
    "search": ["word"],
    "erase": ["c", "--reason", "r"],
    "events": ["c"],
    "export": ["c", "out"],
    "feed": [],
    "fork": ["c", "--at", "1"],
    "hand-over": ["c", "sandbox-1"],
    "indices": ["c"],
    "ingest": ["--port", "0"],
    "list": [],
    "prune": ["--inactive-for", "1d", "--dry-run"],
    "retention": ["run", "--policy", "policy.toml", "--dry-run"],
    "rebuild": [],
    "redact": ["c", "e1", "--reason", "r"],
    "refresh": [],
    "serve": ["--port", "0"],
    "stats": [],
    "sync": ["http://127.0.0.1:9"],
    "verify": [],
    "view": ["c"],
}


def test_no_command_but_the_creating_ones_creates_a_database_file(tmp_path: Path) -> None:
    assert sorted(NEEDS_A_STORE) == sorted(set(LAZY_COMMANDS) - CREATING_COMMANDS)
    runs = [(name, ["--url", "sqlite:///missing.db"], args) for name, args in NEEDS_A_STORE.items()]
    runs.append(("serve", [], ["--url", "sqlite:///missing.db", "--port", "0"]))  # its own
    for name, url, args in runs:
        done = run(*url, name, *args, cwd=tmp_path)
        line = error_line(done)
        assert "missing.db: no such database file" in line, (name, line)
        assert list(tmp_path.iterdir()) == [], name


def test_demo_keeps_out_of_a_database_holding_other_tables(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    other = create_engine(url)
    with other.begin() as conn:
        conn.execute(text("CREATE TABLE invoices (id INTEGER PRIMARY KEY)"))
    other.dispose()
    line = error_line(run("demo", url=url))
    assert "holds other tables (invoices)" in line and "viewstore init" in line
    check = create_engine(url)
    with check.connect() as conn:
        tables = conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))
        assert [name for (name,) in tables] == ["invoices"]
    check.dispose()
    assert run("init", url=url).returncode == 0  # on purpose: then the demo may run
    assert run("demo", url=url).returncode == 0


def test_a_table_wider_than_the_console_meets_a_closed_pipe_quietly() -> None:
    """A table wider than the console is written by a wider twin console: a reader that has
    gone must end it with success too (a plain rich console exits with 1)."""
    code = (
        "import os\n"
        "from rich.table import Table\n"
        "from viewstore.cli.app import _console\n"
        "from viewstore.cli.render import print_table\n"
        "read, write = os.pipe()\n"
        "os.close(read)\n"
        "console = _console(file=os.fdopen(write, 'w'), width=20)\n"
        "table = Table('id', 'text')\n"
        "table.add_row('x' * 200, 'y')\n"
        "print_table(console, table)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")


def _store_files(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.startswith("viewstore.db"))


def test_append_creates_a_whole_store_or_no_file(tmp_path: Path, vectors_dir: Path) -> None:
    """`append` on a file that does not exist makes a store every command reads (the
    schema, at once), once the input is checked; input it refuses leaves no file behind."""
    source = vectors_dir / "openhands" / OPENHANDS_HEX / "events"
    lines = [json.dumps(json.loads(path.read_text())) for path in sorted(source.glob("*.json"))]
    (tmp_path / "bad.jsonl").write_text('{"kind": "MessageEvent"}\n')
    (tmp_path / "twice.jsonl").write_text(f"{lines[0]}\n{lines[0]}\n")
    (tmp_path / "good.jsonl").write_text("".join(f"{line}\n" for line in lines))
    for refused in ("bad.jsonl", "twice.jsonl"):  # by the command, then by the store
        error_line(run("append", "c", refused, cwd=tmp_path))
        assert _store_files(tmp_path) == [], refused
    done = run("append", "c", "good.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = run("list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [record["id"] for record in json.loads(listed.stdout)] == ["c"]


def test_import_creates_a_whole_store_or_no_file(tmp_path: Path, vectors_dir: Path) -> None:
    broken = tmp_path / "broken" / OPENHANDS_HEX / "events"
    broken.mkdir(parents=True)
    (broken / "event-00000-x.json").write_text("{not json")
    (tmp_path / "empty").mkdir()
    for folder in ("missing", "empty", "broken"):
        done = run("import", folder, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert _store_files(tmp_path) == [], folder
    done = run("import", str(vectors_dir / "openhands"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for command in (["list"], ["stats"], ["verify"]):
        assert run(*command, cwd=tmp_path).returncode == 0, command


def test_serve_on_a_busy_port_says_so_before_any_url(tmp_path: Path) -> None:
    """One line and exit 2, before the viewer's URL is printed (uvicorn, left to find out,
    printed the URL first and then exited 3)."""
    if importlib.util.find_spec("uvicorn") is None:
        pytest.skip("the web extra is not installed")
    url = f"sqlite:///{tmp_path / 'v.db'}"
    assert run("init", url=url).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = error_line(run("serve", "--port", str(port), url=url))
    assert f"cannot listen on 127.0.0.1:{port}" in line and "another --port" in line
