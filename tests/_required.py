"""Tests that must not skip where CI says so: a plugin per folder, registered by the root
conftest.

Modules that need an optional part (the OpenHands SDK, an agent server) skip where it cannot
be installed. With the folder's environment variable set (``.ci/run`` sets it), any such skip
fails the session instead, and the summary names the skipped tests.

The plugins live at the root, not in the folders' conftests: the suite runs on several
pytest-xdist workers, and the controller that decides the session's exit status loads no
folder's conftest (it collects nothing), only the reports the workers send it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass(eq=False)  # a plugin: pluggy keeps it in sets, so hashed by identity
class RequiredSkips:
    env: str  # the variable that makes a skip fail
    what: str  # what the skipped tests need, for the summary line
    folder: str | tuple[str, ...]  # node id prefix(es) of the tests it watches
    skipped: list[str] = field(default_factory=list)

    def required(self) -> bool:
        return os.environ.get(self.env, "").strip() not in ("", "0", "false", "no")

    def note(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if (
            report.skipped
            and report.nodeid.startswith(self.folder)
            and "openhands" in str(report.longrepr).lower()
        ):
            self.skipped.append(report.nodeid)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.note(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.note(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.required() and self.skipped and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(
        self, terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        if self.required() and self.skipped:
            terminalreporter.write_line(
                f"FAILED: {len(self.skipped)} {self.what} test module(s)/test(s) skipped while "
                f"{self.env}=1: {', '.join(self.skipped[:5])}",
                red=True,
                bold=True,
            )


#: The folders whose skips CI refuses, each with its variable (set by .ci/run).
REQUIRED = (
    ("VIEWSTORE_REQUIRE_OPENHANDS", "OpenHands SDK", "tests/openhands/"),
    ("VIEWSTORE_REQUIRE_AGENT_SERVER", "agent-server", ("tests/ingest/", "tests/agent_servers/")),
)


def register(config: pytest.Config) -> None:
    for env, what, folder in REQUIRED:
        config.pluginmanager.register(RequiredSkips(env, what, folder), f"required-{env}")
