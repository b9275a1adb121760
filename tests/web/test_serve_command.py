"""``viewstore serve`` as a user runs it: bad set-ups are one line on stderr and exit 2 (the
working server is driven by the browser tests)."""

from __future__ import annotations

from pathlib import Path

from ..cli._helpers import failed_with_one_line, run_viewstore


def test_serve_without_a_schema_says_so(tmp_path: Path) -> None:
    done = run_viewstore(f"sqlite:///{tmp_path / 'empty.db'}", "serve", "--port", "0")
    assert "viewstore init" in failed_with_one_line(done)


def test_serve_refuses_a_database_it_does_not_run_on(tmp_path: Path) -> None:
    done = run_viewstore("sqlite:///x.db", "serve", "--url", "mysql://u@h/db", "--port", "0")
    assert "mysql" in failed_with_one_line(done)


def test_serve_rejects_a_bad_port() -> None:
    done = run_viewstore("sqlite:///x.db", "serve", "--port", "70000")
    assert done.returncode == 2 and "Traceback" not in done.stderr
