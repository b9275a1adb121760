"""Reading ``/api/feed/follow`` as a browser would: a real socket, one line at a time (the
stream never ends, so a reader thread hands the lines over as they come)."""

from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

WAIT = 60.0


class Refused(Exception):
    """The server answered the stream's request with something else than a stream."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        super().__init__(f"{status}: {body[:200]!r}")
        self.status, self.headers, self.body = status, headers, body


@contextmanager
def stream(url: str, headers: dict[str, str] | None = None) -> Iterator[queue.Queue[str]]:
    """The lines of the event stream at ``url``, as they come; ``Refused`` if none opens."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=WAIT)
    conn.request("GET", f"{parts.path}?{parts.query}", headers=headers or {})
    sock = conn.sock
    response = conn.getresponse()
    if response.status != 200:
        found = {name.lower(): value for name, value in response.getheaders()}
        body = response.read()
        conn.close()
        raise Refused(response.status, found, body)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        try:
            for raw in response:
                lines.put(raw.decode().rstrip("\n"))
        except Exception:  # the test shut the socket under it: http.client fails in
            pass  # several ways then; the lines that came before are in the queue

    threading.Thread(target=read, daemon=True).start()
    try:
        assert lines.get(timeout=WAIT) == ": following the change feed"
        yield lines
    finally:
        # The reader is blocked in recv: shut the socket so it returns, as a closed tab would.
        sock.shutdown(socket.SHUT_RDWR)
        conn.close()


def events(lines: queue.Queue[str], count: int) -> list[tuple[str, dict[str, Any]]]:
    """The next ``count`` events: (id, data)."""
    found: list[tuple[str, dict[str, Any]]] = []
    event_id = None
    while len(found) < count:
        line = lines.get(timeout=WAIT)
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            assert event_id is not None
            found.append((event_id, json.loads(line[6:])))
    return found


def message(eid: str) -> dict[str, Any]:
    return {"kind": "MessageEvent", "id": eid, "source": "user"}
