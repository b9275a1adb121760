"""A real ``viewstore serve`` process for the viewer's tests, and requests sent to it byte for
byte (a raw socket: no client library rewrites the request line)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:PORT
    port: int
    log: Path  # the server's stderr

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


@contextmanager
def serving(url: str, *, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``viewstore serve`` on the store at ``url`` (``env``: added to its environment)."""
    port = free_port()
    script = Path(sys.executable).parent / "viewstore"
    command = [str(script), "serve", "--url", url, "--host", "127.0.0.1", "--port", str(port)]
    with TemporaryDirectory() as folder:
        log = Path(folder) / "serve.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, **(env or {})},
            )
        served = Served(f"http://127.0.0.1:{port}", port, log)
        try:
            _wait_until_up(served, process)
            yield served
        finally:
            process.terminate()
            process.wait(timeout=10)


def _wait_until_up(served: Served, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(served.base + "/", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # an answer (401 behind a token) is up too
        except OSError:
            if process.poll() is not None:
                pytest.fail(f"viewstore serve exited: {served.log.read_text()}")
            time.sleep(0.1)
    pytest.fail("viewstore serve did not answer within 20 s")


@dataclass(frozen=True)
class RawAnswer:
    status: int
    headers: dict[str, str]  # lower-case names; a repeated header: the last one
    body: bytes


def raw_get(served: Served, target: bytes, headers: dict[str, str] | None = None) -> RawAnswer:
    """``GET target`` exactly as given, on a connection of its own; the answer."""
    lines = [b"GET " + target + b" HTTP/1.1", b"Host: viewer.local", b"Connection: close"]
    lines += [f"{name}: {value}".encode("latin-1") for name, value in (headers or {}).items()]
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received, f"the server closed the connection without an answer to {target!r}"
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    found = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    return RawAnswer(int(status_line.split()[1]), found, body)
