"""The retention sweeper a long-running command hosts (``viewstore ingest``, ``viewstore
serve``; docs/retention.md, "Hosting the sweeper"): its options, the sweeper they ask for,
checked before the server starts, and its log lines on stderr."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from viewstore.cli.app import Context, open_url

if TYPE_CHECKING:
    from viewstore.sweeper import RetentionSweeper

F = TypeVar("F", bound=Callable[..., Any])


def retention_options(func: F) -> F:
    """``--retention-policy FILE``, ``--retention-every DURATION``, ``--retention-url URL``."""
    options = [
        click.option(
            "--retention-policy",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            metavar="FILE",
            help="Apply this retention policy (docs/retention.md) every --retention-every, "
            "in a thread of this process.",
        ),
        click.option(
            "--retention-every",
            default="1h",
            show_default=True,
            metavar="DURATION",
            help="How often the retention policy is applied (1h, 30m, 90s).",
        ),
        click.option(
            "--retention-url",
            envvar="VIEWSTORE_RETENTION_URL",
            show_envvar=True,
            default=None,
            metavar="URL",
            help="The database URL the retention sweeper signs in with: on PostgreSQL, the "
            "owner's (default: this command's URL).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def prepare(
    state: Context,
    url: str,
    *,
    retention_policy: Path | None,
    retention_every: str,
    retention_url: str | None,
) -> RetentionSweeper | None:
    """The sweeper the options ask for (None: no policy), not started; a bad policy file,
    period or URL fails here, in one line, before the server starts."""
    from viewstore.sweeper import RetentionSweeper, parse_every  # noqa: PLC0415 - start-up time

    every = parse_every(retention_every, "--retention-every")  # a typo is said even unused
    if retention_policy is None:
        return None
    from viewstore.store import EventStore  # noqa: PLC0415 - start-up time

    store = open_url(retention_url or url, lambda url: EventStore(url, schema=state.schema))
    sweeper = RetentionSweeper(store, retention_policy, every=every, close_store=True)
    try:
        sweeper.policy()
        store.conversations(limit=1)  # a wrong URL or password is said now, not in an hour
    except BaseException:
        store.close()
        raise
    return sweeper


@contextmanager
def running(sweeper: RetentionSweeper | None) -> Iterator[None]:
    """The sweeper working while the block (the server) runs, its lines on stderr."""
    if sweeper is None:
        yield
        return
    log_to_stderr(logging.INFO)
    sweeper.start()
    try:
        yield
    finally:
        sweeper.stop(timeout=2)


class _Echo(logging.Handler):
    """Writes to the stderr of the moment (click's test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record), err=True)


def log_to_stderr(level: int) -> None:
    """The sweeper's log lines from ``level`` up, on stderr: the command is the application,
    and no one else configures logging in it."""
    logger = logging.getLogger("viewstore.retention")
    for handler in [h for h in logger.handlers if isinstance(h, _Echo)]:
        logger.removeHandler(handler)
    echo = _Echo(level)
    echo.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(echo)
    logger.setLevel(min(level, logger.getEffectiveLevel()))
