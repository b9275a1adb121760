"""``/api/feed/follow`` on a real ``viewstore serve`` (the stream never ends, so it is read
line by line over a real socket): it starts at the feed's tail, or after ``?after=`` or the
``Last-Event-ID`` a reconnecting browser sends, streams each new commit as one event, keeps the
security headers, and refuses a bad cursor with a 400."""

from __future__ import annotations

import http.client
import json
import queue
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore

from .test_browser import _serving

WAIT = 60.0


@contextmanager
def _stream(url: str, headers: dict[str, str] | None = None) -> Iterator[queue.Queue[str]]:
    """The lines of the event stream at ``url``, as they come."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=WAIT)
    conn.request("GET", f"{parts.path}?{parts.query}", headers=headers or {})
    sock = conn.sock
    response = conn.getresponse()
    assert response.status == 200
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


def _events(lines: queue.Queue[str], count: int) -> list[tuple[str, dict[str, Any]]]:
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


def _listeners(store: EventStore) -> int:
    if store.engine.dialect.name != "postgresql":
        return 0
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
            )
        ).scalar_one()
    return int(found)


def _message(eid: str) -> dict[str, Any]:
    return {"kind": "MessageEvent", "id": eid, "source": "user"}


def test_the_stream_follows_the_feed(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("old", [_message("o1"), _message("o2")])
        with _serving(db_url) as base:
            with _stream(base + "/api/feed/follow") as lines:
                store.append("new", [_message("n1")])
                store.append("other", [_message("x1")])
                got = _events(lines, 2)
                listening = _listeners(store)
            if store.engine.dialect.name == "postgresql":
                assert listening == 1  # the stream's own connection
                deadline = time.monotonic() + WAIT  # a closed stream closes it
                while _listeners(store) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert _listeners(store) == 0
        assert [(d["conversation_id"], d["event_id"]) for _, d in got] == [
            ("new", "n1"),
            ("other", "x1"),
        ]
        assert [cursor for cursor, _ in got] == [d["cursor"] for _, d in got]
        first = store.feed(limit=1)[0].cursor
        with _serving(db_url) as base:
            with _stream(f"{base}/api/feed/follow?after={first}") as lines:
                after = [d["event_id"] for _, d in _events(lines, 3)]
            with _stream(base + "/api/feed/follow", {"Last-Event-ID": got[0][0]}) as lines:
                resumed = [d["event_id"] for _, d in _events(lines, 1)]
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base + "/api/feed/follow?after=nonsense", timeout=WAIT)
            assert refused.value.code == 400
            assert "cursor" in json.loads(refused.value.read())["error"]
    assert after == ["o2", "n1", "x1"]
    assert resumed == ["x1"]


def test_the_list_page_loads_the_follow_script(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
    with _serving(db_url) as base:
        with urllib.request.urlopen(base + "/", timeout=WAIT) as page:
            html = page.read().decode()
        with urllib.request.urlopen(base + "/static/follow.js", timeout=WAIT) as script:
            source = script.read().decode()
    assert '<p class="news" id="feed-news" hidden>' in html
    assert '<script src="/static/follow.js"></script>' in html
    assert 'new EventSource("/api/feed/follow")' in source
