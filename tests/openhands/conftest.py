"""The OpenHands SDK tests: the real SDK, offline.

Each module starts with ``pytest.importorskip("openhands.sdk")``, so where the SDK cannot be
installed (it needs Python 3.12) they skip with the reason. With
``VIEWSTORE_REQUIRE_OPENHANDS=1`` (set by .ci/run) such a skip fails the session instead,
as ``VIEWSTORE_REQUIRE_POSTGRES`` does for PostgreSQL.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# Offline: LiteLLM must not try to download its model cost map; no SDK banner in the output.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

REQUIRE_OPENHANDS_ENV = "VIEWSTORE_REQUIRE_OPENHANDS"
SDK_SKIP_REASON = "openhands.sdk is not importable (pip install 'viewstore[openhands]')"
_SDK_SKIPS: list[str] = []


def _require() -> bool:
    return os.environ.get(REQUIRE_OPENHANDS_ENV, "").strip() not in ("", "0", "false", "no")


def _note(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and "openhands" in str(report.longrepr).lower():
        _SDK_SKIPS.append(report.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note(report)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _require() and _SDK_SKIPS and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _require() and _SDK_SKIPS:
        terminalreporter.write_line(
            f"FAILED: {len(_SDK_SKIPS)} OpenHands SDK test module(s)/test(s) skipped while "
            f"{REQUIRE_OPENHANDS_ENV}=1: {', '.join(_SDK_SKIPS[:5])}",
            red=True,
            bold=True,
        )
