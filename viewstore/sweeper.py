"""The retention sweeper: a policy file (docs/retention.md) applied again and again, by
``viewstore retention run --every`` in its own process or by a thread of a long-running one
(``viewstore ingest``, ``viewstore serve``, the store-backed agent server: docs/retention.md,
"Hosting the sweeper").

Each run reads the policy file again, so an edited policy counts from the next run, and logs
one line under ``viewstore.retention``. A failing run (the database away, a mistake in the
policy file) is logged and the next one is tried a period later: a host outlives its sweeper's
troubles. The sweeper opens a store of its own, so it may sign in as the database's owner (who
alone may compact and erase) while its host writes as the writer role.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Self

from viewstore.domain.errors import InvalidArgumentError, ViewstoreError

if TYPE_CHECKING:
    from viewstore.store import EventStore, RetentionPolicy, RetentionReport

log = logging.getLogger("viewstore.retention")

DEFAULT_EVERY = timedelta(hours=1)
_PERIOD = re.compile(r"^\s*(\d{1,6})\s*([dhms])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def parse_every(text: str, where: str) -> timedelta:
    """A period between runs: ``1h``, ``30m``, ``90s`` (a positive number and a unit)."""
    match = _PERIOD.match(text)
    if match is None or int(match.group(1)) == 0:
        raise InvalidArgumentError(
            f"{where} must be a positive number and a unit d, h, m or s (like 1h), got {text!r}"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def summary(report: RetentionReport) -> str:
    """A run in one line, for the log."""
    erase, compact, redact = ("erased", "compacted", "redacted")
    if report.dry_run:
        erase, compact, redact = ("would erase", "would compact", "would redact")
    busy = f" ({report.busy} busy: the next run takes them)" if report.busy else ""
    return (
        f"{erase} {len(report.erased)} conversation(s); {compact} {report.events} event(s) "
        f"of {report.compacted_conversations} conversation(s), {report.bytes_freed} bytes; "
        f"{redact} {report.redacted} event(s) of {report.redacted_conversations} "
        f"conversation(s){busy}"
    )


class RetentionSweeper:
    """Applies the policy in ``policy_file`` to ``store`` every ``every``: ``sweep()`` once,
    ``run()`` until ``stop()`` in the calling thread, ``start()`` in a daemon thread of its own.
    ``on_report`` is called with the report of each run ``run()`` makes (the CLI prints it);
    ``close_store``: ``stop()`` closes the store (one opened for the sweeper alone)."""

    def __init__(
        self,
        store: EventStore,
        policy_file: str | Path,
        *,
        every: timedelta = DEFAULT_EVERY,
        pace: float = 2.0,
        dry_run: bool = False,
        on_report: Callable[[RetentionReport], None] | None = None,
        close_store: bool = False,
    ) -> None:
        if not isinstance(every, timedelta) or every <= timedelta(0):
            raise InvalidArgumentError(f"every must be a positive timedelta, got {every!r}")
        self.store = store
        self.policy_file = Path(policy_file)
        self.every = every
        self.pace = pace
        self.dry_run = dry_run
        self.on_report = on_report
        self._close_store = close_store
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def policy(self) -> RetentionPolicy:
        """The policy as the file says now."""
        from viewstore.store import RetentionPolicy  # noqa: PLC0415 - start-up time

        return RetentionPolicy.from_file(self.policy_file)

    def sweep(self) -> RetentionReport:
        """One run: the policy file read again and applied, and logged; raises what failed."""
        report = self.store.apply_retention(self.policy(), dry_run=self.dry_run, pace=self.pace)
        log.info("retention: %s", summary(report))
        return report

    def run(self, *, wait_first: bool = False) -> None:
        """Sweep every period until ``stop()``, the first at once (``wait_first``: a period
        from now). A run that fails is logged, and the next is tried a period later."""
        wait = self.every.total_seconds() if wait_first else 0.0
        while not self._stopping.wait(wait):
            wait = self.every.total_seconds()
            try:
                report = self.sweep()
            except ViewstoreError as error:  # says what is wrong in its own words
                log.error("retention run failed: %s", " ".join(str(error).split()))
                continue
            except Exception:
                log.exception("retention run failed")
                continue
            if self.on_report is not None:  # outside the try: its own failure is not the run's
                self.on_report(report)

    def start(self) -> Self:
        """``run()`` in a daemon thread: a run in progress never holds its host's exit up (a
        run cut short leaves whole batches done, and the next goes on)."""
        self._thread = threading.Thread(target=self.run, name="viewstore-retention", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop sweeping: at once between runs, within ``timeout`` s of the call during one
        (else the run goes on until it ends or the process does). Whether it stopped."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                return False  # the store stays open: the run still uses it
        if self._close_store:
            self.store.close()
        return True


def from_environment(
    url: str, environ: Mapping[str, str] = os.environ, *, schema: str | None = None
) -> RetentionSweeper | None:
    """The sweeper ``VIEWSTORE_RETENTION_POLICY`` asks for (None: not set), every
    ``VIEWSTORE_RETENTION_EVERY`` (default 1h), on a store of its own at
    ``VIEWSTORE_RETENTION_URL`` (default: ``url``); not started. A bad setting raises
    ``InvalidArgumentError`` naming its variable, before anything is opened."""
    from viewstore.store import EventStore, RetentionPolicy  # noqa: PLC0415 - start-up time

    policy_file = environ.get("VIEWSTORE_RETENTION_POLICY")
    if not policy_file:
        return None
    every = parse_every(
        environ.get("VIEWSTORE_RETENTION_EVERY") or "1h", "VIEWSTORE_RETENTION_EVERY"
    )
    try:
        RetentionPolicy.from_file(policy_file)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"VIEWSTORE_RETENTION_POLICY: {error}") from error
    own_url = environ.get("VIEWSTORE_RETENTION_URL") or url
    return RetentionSweeper(
        EventStore(own_url, schema=schema), policy_file, every=every, close_store=True
    )
