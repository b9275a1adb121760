"""The click group, its global options and the one place where errors become exit codes.

Exit codes: 0 success, 1 a check found problems (``verify``), 2 bad usage or bad input. User
errors print one line on stderr and never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from viewstore import __version__
from viewstore.domain.errors import SchemaError, SchemaMismatchError, ViewstoreError

if TYPE_CHECKING:
    from rich.console import Console

    from viewstore.store import EventStore

# Start-up time: `viewstore --help` must not import SQLAlchemy, rich or pydantic, so the store,
# the consoles and each command's module are imported when first needed (LAZY_COMMANDS).
DEFAULT_URL = (
    "sqlite:///viewstore.db"  # = viewstore.store.database.engine.DEFAULT_URL (a test checks)
)

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input found by the CLI itself (a file, a folder, a line): exit 2, one line."""


@dataclass
class Context:
    url: str
    schema: str | None = None
    masking: str | None = None  # the rules file every append of this command masks by
    _store: EventStore | None = None
    _out: Console | None = None
    _err: Console | None = None
    _new_file: str | None = None  # the SQLite file create_if_new() made

    @property
    def out(self) -> Console:
        if self._out is None:
            self._out = _console(highlight=False, soft_wrap=True)
        return self._out

    @property
    def err(self) -> Console:
        if self._err is None:
            self._err = _console(stderr=True, highlight=False)
        return self._err

    @property
    def store(self) -> EventStore:
        if self._store is None:
            from viewstore.store import EventStore  # noqa: PLC0415 - start-up time

            self._store = open_url(
                self.url, lambda url: EventStore(url, schema=self.schema, masking=self.masking)
            )
        return self._store

    def create_if_new(self) -> None:
        """For a command that may create its store (append, import): where the URL names a
        SQLite file that does not exist, create it with the whole schema, so that it is a store
        every other command can read. Call it once the input has been checked. If the command
        then stores nothing there (every conversation refused), the file goes again at close:
        no command leaves a file it did not fill."""
        store = self.store  # a URL that is none is reported first, as by every command
        path = new_sqlite_file(self.url)
        if path is None:
            return
        self._new_file = path
        store.create_schema()

    def close(self) -> None:
        if self._store is not None:
            path, self._new_file = self._new_file, None
            empty = path is not None and not self._holds_conversations()
            self._store.close()
            if empty and path is not None:
                for suffix in ("", "-wal", "-shm", "-journal"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path + suffix)

    def _holds_conversations(self) -> bool:
        try:
            return bool(self.store.conversations(limit=1))
        except ViewstoreError:  # the schema did not get there: nothing was stored either
            return False

    def print_json(self, value: Any) -> None:
        click.echo(json.dumps(value, ensure_ascii=False, indent=2))


#: The commands that may create a SQLite database file; every other one needs a store there.
CREATING_COMMANDS = frozenset({"init", "demo", "append", "import"})

T = TypeVar("T")


def open_url(url: str, opener: Callable[[str], T]) -> T:
    """``opener(url)`` as every command opens its database: a missing SQLite file refused
    before SQLite would create it (unless the command is one that creates a store), a URL
    that cannot be parsed or whose driver is missing reported as a bad URL in one line.
    ``Context.store`` and ``serve`` (which opens its own read-only store) both come here."""
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # noqa: PLC0415 - start-up

    try:
        _refuse_to_create(url)
        return opener(url)
    except ViewstoreError:
        raise  # says what is wrong in its own words, without echoing a password
    except (ArgumentError, NoSuchModuleError, ValueError) as error:
        raise UserError(f"bad database URL {url!r}: {error}") from error


def _refuse_to_create(url: str) -> None:
    """A read command (``stats``, ``view``, ...) on a SQLite file that does not exist: say so,
    rather than let SQLite create an empty file and then report a missing schema."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or ctx.info_name in CREATING_COMMANDS:
        return
    path = new_sqlite_file(url)
    if path is not None:
        raise UserError(f"{path}: no such database file: run `viewstore init` to create it")


def new_sqlite_file(url: str) -> str | None:
    """The path of the SQLite file ``url`` names if that file does not exist yet; None for
    another database, one in memory, a ``file:`` URI (SQLite's own options decide), or a file
    that is there."""
    from viewstore.store import normalize_url  # noqa: PLC0415 - start-up time

    parsed = normalize_url(url)
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:":
        return None
    if path.startswith("file:") or os.path.exists(path):
        return None
    return path


def fail(message: str) -> NoReturn:
    click.echo(f"error: {printable(message)}", err=True)
    sys.exit(EXIT_USAGE)


def printable(text: str) -> str:
    """``text`` with lone surrogates escaped (``\\udcff``). A path or argument that was not
    UTF-8 reaches Python as such surrogates, and writing them to a UTF-8 stream fails."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn every expected error into one line on stderr and exit code 2."""
    try:
        yield
    except SchemaMismatchError as error:  # a schema init cannot fix: its own words
        fail(_one_line(str(error)))
    except SchemaError:
        fail(
            "the database has no viewstore schema (or an outdated one): run `viewstore init` first"
        )
    except ViewstoreError as error:
        fail(_one_line(str(error)))
    except UserError as error:
        fail(_one_line(str(error)))
    except click.UsageError as error:
        # click would print the usage, a hint and the error on three lines; the contract is
        # one line (the usage is one `--help` away).
        fail(_one_line(error.format_message()))


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unknown error"


SHORT_HELP = 64  # characters of a command's help in the list of commands
#: Each command, the module that defines it, and its one-line help (for `--help`, which then
#: imports none of them; tests/cli/test_habits.py keeps these equal to the commands').
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "append": ("commands", "Append OpenHands events (JSONL, one event per line; - for..."),
    "checkpoint": ("commands", "Print the chain heads of every conversation and one digest..."),
    "citus": ("citus", "Run a store on a Citus cluster (see docs/distribution.md)."),
    "compact": ("lifecycle", "Remove the content of every event that every view has..."),
    "demo": ("commands", "Build a realistic OpenHands conversation step by step and..."),
    "erase": ("lifecycle", "Erase a conversation: all its rows go, a tombstone stays."),
    "events": ("commands", "List a conversation's stored events (the log, in append order)."),
    "export": ("transfer", "Write a conversation back as an OpenHands folder..."),
    "feed": ("catalogue", "The change feed: every conversation's events in commit order,..."),
    "fork": ("lifecycle", "Start a new conversation from a conversation's first events..."),
    "hand-over": ("ingest", "Make SOURCE (an agent server's name) the owner of a..."),
    "import": ("transfer", "Import OpenHands conversation folders (or parent folders..."),
    "indices": ("commands", "Print the manipulation indices of a conversation's live view."),
    "ingest": ("ingest", "Receive OpenHands agent servers' webhooks into the store (see..."),
    "init": ("commands", "Create or migrate the database schema to the newest revision."),
    "list": ("catalogue", "The conversations, two lines each: id, last activity (UTC),..."),
    "masking": ("masking", "Masking rules: check a rules file, try it on events, list..."),
    "prune": ("lifecycle", "Erase every conversation inactive for longer than a retention..."),
    "rebuild": ("commands", "Rewrite the view and index rows from the event log (one..."),
    "refresh": ("catalogue", "Bring the catalogue's copies of each conversation's events..."),
    "redact": ("lifecycle", "Remove an event's content from the log and every copy; its..."),
    "retention": ("retention", "Apply a retention policy: compact what every view forgot,..."),
    "search": ("search", "Find the events whose text holds every word of QUERY, best..."),
    "serve": ("serve", "Serve a read-only web viewer of the conversations."),
    "stats": ("commands", "Counts: conversations, events, view sizes, condensations."),
    "sync": ("ingest", "Pull every conversation of an agent server (a URL or a source..."),
    "verify": ("commands", "Check the hash chain, every column derived from the log, that..."),
    "view": ("commands", "Show a conversation's view: what the LLM is sent, and where a..."),
}


class ViewstoreGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        with user_errors(), closed_pipe_is_fine():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            module, _help = LAZY_COMMANDS[cmd_name]
            importlib.import_module(f"viewstore.cli.{module}")  # registers its commands
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is not None:
                rows.append((name, command.get_short_help_str(limit=SHORT_HELP)))
            else:
                rows.append((name, LAZY_COMMANDS[name][1]))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@contextmanager
def closed_pipe_is_fine() -> Iterator[None]:
    """``viewstore demo | head -1``: the reader has gone, so stop quietly and successfully,
    as command-line tools do. Later writes (the interpreter's last flush) go to /dev/null."""
    try:
        yield
    except BrokenPipeError:
        silence_stdout()
        sys.exit(EXIT_OK)


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console  # noqa: PLC0415 - start-up time, see above

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:  # rich's own exits with 1
            self.quiet = True
            silence_stdout()
            raise SystemExit(EXIT_OK)

    return QuietConsole


def _console(**options: Any) -> Console:
    return _console_class()(**options)


def silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


@click.group(cls=ViewstoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="viewstore")
@click.option(
    "--url",
    envvar="VIEWSTORE_URL",
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    help="Database URL: sqlite:///file.db (a file here; sqlite:////abs/file.db an absolute "
    "path) or postgresql://user@host/db. A bare path is not one.",
)
@click.option(
    "--schema",
    envvar="VIEWSTORE_SCHEMA",
    default=None,
    show_envvar=True,
    help="PostgreSQL only: keep the store's tables in this schema (default: public).",
)
@click.option(
    "--masking",
    envvar="VIEWSTORE_MASKING_RULES",
    default=None,
    show_envvar=True,
    metavar="FILE",
    help="Mask what these rules find in each event before it is stored (a TOML file: "
    "docs/masking.md).",
)
@click.pass_context
def cli(ctx: click.Context, url: str, schema: str | None, masking: str | None) -> None:
    """viewstore: OpenHands conversations, their views and manipulation indices, in SQL."""
    state = Context(url=url, schema=schema, masking=masking)
    ctx.obj = state
    ctx.call_on_close(state.close)


pass_state = click.make_pass_decorator(Context)


def as_of_option(what: str) -> Callable[[F], F]:
    """``--as-of SEQ``: read ``what`` as it was right after event SEQ."""
    return click.option(
        "--as-of",
        type=click.IntRange(min=0),
        default=None,
        metavar="SEQ",
        help=f"{what} right after event SEQ (1-based).",
    )


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(
        func
    )


def main() -> None:
    # Every line printed may quote a path or an argument that was not UTF-8 (the OS allows
    # any bytes there): print such characters escaped rather than fail on them.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        cli(prog_name="viewstore")
    except SystemExit:
        try:  # what is still buffered may meet a reader that has gone
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()
            raise SystemExit(EXIT_OK) from None
        raise
