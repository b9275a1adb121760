"""The ingest tests against real OpenHands agent servers.

Modules that need ``openhands-agent-server`` start with ``pytest.importorskip(
"openhands.agent_server")``: where it is not installed (the README's ``.venv``, Python 3.11)
they skip. ``.ci/run`` runs this folder again in ``.venv-agent-server`` with
``VIEWSTORE_REQUIRE_AGENT_SERVER=1``, which turns such a skip into a failure, as
``VIEWSTORE_REQUIRE_OPENHANDS`` does for the SDK tests (tests/openhands/conftest.py).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

REQUIRE_ENV = "VIEWSTORE_REQUIRE_AGENT_SERVER"
_SKIPS: list[str] = []


def _require() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0", "false", "no")


def _note(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and "openhands" in str(report.longrepr).lower():
        _SKIPS.append(report.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note(report)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _require() and _SKIPS and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _require() and _SKIPS:
        terminalreporter.write_line(
            f"FAILED: {len(_SKIPS)} agent-server test module(s)/test(s) skipped while "
            f"{REQUIRE_ENV}=1: {', '.join(_SKIPS[:5])}",
            red=True,
            bold=True,
        )
