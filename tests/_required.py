"""Tests that must not skip where CI says so: the pytest hooks a folder's conftest takes.

Modules that need an optional part (the OpenHands SDK, an agent server) skip where it cannot
be installed. With the folder's environment variable set (``.ci/run`` sets it), any such skip
fails the session instead, and the summary names the skipped tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class RequiredSkips:
    env: str  # the variable that makes a skip fail
    what: str  # what the skipped tests need, for the summary line
    skipped: list[str] = field(default_factory=list)

    def required(self) -> bool:
        return os.environ.get(self.env, "").strip() not in ("", "0", "false", "no")

    def note(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped and "openhands" in str(report.longrepr).lower():
            self.skipped.append(report.nodeid)

    def session_finish(self, session: pytest.Session) -> None:
        if self.required() and self.skipped and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def summary(self, terminalreporter: Any) -> None:
        if self.required() and self.skipped:
            terminalreporter.write_line(
                f"FAILED: {len(self.skipped)} {self.what} test module(s)/test(s) skipped while "
                f"{self.env}=1: {', '.join(self.skipped[:5])}",
                red=True,
                bold=True,
            )


def hooks(env: str, what: str) -> dict[str, Any]:
    """The hooks for a conftest's namespace: ``globals().update(hooks(...))``."""
    skips = RequiredSkips(env, what)

    def pytest_runtest_logreport(report: pytest.TestReport) -> None:
        skips.note(report)

    def pytest_collectreport(report: pytest.CollectReport) -> None:
        skips.note(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
        skips.session_finish(session)

    def pytest_terminal_summary(
        terminalreporter: Any, exitstatus: int, config: pytest.Config
    ) -> None:
        skips.summary(terminalreporter)

    return {
        "pytest_runtest_logreport": pytest_runtest_logreport,
        "pytest_collectreport": pytest_collectreport,
        "pytest_sessionfinish": pytest_sessionfinish,
        "pytest_terminal_summary": pytest_terminal_summary,
    }
