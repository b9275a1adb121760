"""``viewstore serve`` as a user runs it: bad set-ups are one line on stderr and exit 2 (the
working server is driven by the browser tests)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from viewstore import EventStore

from ..cli._helpers import failed_with_one_line, run_viewstore


def test_serve_without_a_schema_says_so(tmp_path: Path) -> None:
    done = run_viewstore(f"sqlite:///{tmp_path / 'empty.db'}", "serve", "--port", "0")
    assert "viewstore init" in failed_with_one_line(done)


def test_serve_refuses_a_database_it_does_not_run_on(tmp_path: Path) -> None:
    done = run_viewstore("sqlite:///x.db", "serve", "--url", "mysql://u@h/db", "--port", "0")
    assert "mysql" in failed_with_one_line(done)


def test_serve_refuses_a_bad_stream_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'capped.db'}"
    with EventStore(url) as store:
        store.create_schema()
    monkeypatch.setenv("VIEWSTORE_SERVE_MAX_STREAMS", "many")
    done = run_viewstore(url, "serve", "--port", "0")
    assert "VIEWSTORE_SERVE_MAX_STREAMS must be a whole number" in failed_with_one_line(done)


def test_serve_rejects_a_bad_port() -> None:
    done = run_viewstore("sqlite:///x.db", "serve", "--port", "70000")
    assert done.returncode == 2 and "Traceback" not in done.stderr


@pytest.mark.postgres
def test_serve_reads_the_store_in_the_schema_given(fresh_pg_url: str) -> None:
    """``viewstore --schema S serve`` serves the store kept in schema ``S`` (it once ignored
    ``--schema`` and reported a missing store)."""
    with EventStore(fresh_pg_url, schema="team_a") as store:
        store.create_schema()
        store.append("c", [{"kind": "MessageEvent", "id": "m1", "source": "user"}])
    script = Path(sys.executable).parent / "viewstore"
    env = {k: v for k, v in os.environ.items() if k != "VIEWSTORE_URL"}
    command = [str(script), "--url", fresh_pg_url, "--schema", "team_a", "serve", "--port", "0"]
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as server:
        try:
            assert server.stderr is not None
            first = server.stderr.readline()  # the startup line, or the one-line error
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert first.startswith("viewstore viewer on http://"), first


def test_serve_with_workers_serves_from_each_process(tmp_path: Path) -> None:
    """``--workers 2``: two server processes behind one port, each opening the store the
    parent checked (the settings pass through the environment, token included)."""
    url = f"sqlite:///{tmp_path / 'served.db'}"
    with EventStore(url) as store:
        store.create_schema()
        store.append("c-workers", [{"kind": "MessageEvent", "id": "m1", "source": "user"}])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = Path(sys.executable).parent / "viewstore"
    env = {**os.environ, "VIEWSTORE_SERVE_TOKEN": "s3cret"}
    command = [str(script), "--url", url, "serve", "--port", str(port), "--workers", "2"]
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as server:
        try:
            assert server.stderr is not None
            assert "2 processes" in server.stderr.readline()
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    answer = httpx.get(f"{base}/c/c-workers", headers=_BEARER, timeout=5)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "the workers never answered"
                    time.sleep(0.2)
            assert answer.status_code == 200 and "c-workers" in answer.text
            assert httpx.get(f"{base}/c/c-workers", timeout=5).status_code == 401
            children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
            workers = [
                pid
                for pid in children
                if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
            ]
            assert len(workers) == 2
        finally:
            server.terminate()
            server.wait(timeout=30)


_BEARER = {"Authorization": "Bearer s3cret"}
