"""The click group, its global options and the one place where errors become exit codes.

Exit codes: 0 success, 1 a check found problems (``verify``), 2 bad usage or bad input. User
errors print one line on stderr and never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from viewstore.errors import SchemaError, SchemaMismatchError, ViewstoreError
from viewstore.store import EventStore
from viewstore.store.engine import DEFAULT_URL

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Bad input found by the CLI itself (a file, a folder, a line): exit 2, one line."""


@dataclass
class Context:
    url: str
    out: Console = field(default_factory=lambda: Console(highlight=False, soft_wrap=True))
    err: Console = field(default_factory=lambda: Console(stderr=True, highlight=False))
    _store: EventStore | None = None

    @property
    def store(self) -> EventStore:
        if self._store is None:
            try:
                self._store = EventStore(self.url)
            except ViewstoreError:
                raise  # says what is wrong in its own words, without echoing a password
            except (ArgumentError, NoSuchModuleError, ValueError) as error:
                raise UserError(f"bad database URL {self.url!r}: {error}") from error
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def print_json(self, value: Any) -> None:
        click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


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


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "unknown error"


class ViewstoreGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        with user_errors():
            return super().invoke(ctx)


@click.group(cls=ViewstoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--url",
    envvar="VIEWSTORE_URL",
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    help="Database URL: sqlite:///file.db or postgresql://user@host/db.",
)
@click.pass_context
def cli(ctx: click.Context, url: str) -> None:
    """viewstore: OpenHands conversations, their views and manipulation indices, in SQL."""
    state = Context(url=url)
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
    cli(prog_name="viewstore")
