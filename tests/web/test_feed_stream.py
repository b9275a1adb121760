"""``/api/feed/follow`` on a real ``viewstore serve`` (the stream never ends, so it is read
line by line over a real socket): it starts at the feed's tail, or after ``?after=`` or the
``Last-Event-ID`` a reconnecting browser sends, streams each new commit as one event, keeps the
security headers, and refuses a bad cursor with a 400."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from sqlalchemy import text

from viewstore import EventStore

from ._serve import serving
from ._sse import WAIT, events, message, stream


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


def test_the_stream_follows_the_feed(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("old", [message("o1"), message("o2")])
        with serving(db_url) as served:
            base = served.base
            with stream(base + "/api/feed/follow") as lines:
                store.append("new", [message("n1")])
                store.append("other", [message("x1")])
                got = events(lines, 2)
                listening = _listeners(store)
            if store.engine.dialect.name == "postgresql":
                assert listening == 1  # the streams' shared connection
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
        with serving(db_url) as served:
            base = served.base
            with stream(f"{base}/api/feed/follow?after={first}") as lines:
                after = [d["event_id"] for _, d in events(lines, 3)]
            with stream(base + "/api/feed/follow", {"Last-Event-ID": got[0][0]}) as lines:
                resumed = [d["event_id"] for _, d in events(lines, 1)]
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base + "/api/feed/follow?after=nonsense", timeout=WAIT)
            assert refused.value.code == 400
            assert "cursor" in json.loads(refused.value.read())["error"]
    assert after == ["o2", "n1", "x1"]
    assert resumed == ["x1"]


def test_the_list_page_loads_the_follow_script(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
    with serving(db_url) as served:
        base = served.base
        with urllib.request.urlopen(base + "/", timeout=WAIT) as page:
            html = page.read().decode()
        with urllib.request.urlopen(base + "/static/follow.js", timeout=WAIT) as script:
            source = script.read().decode()
    assert '<p class="news" id="feed-news" hidden>' in html
    assert '<script src="/static/follow.js"></script>' in html
    assert 'new EventSource("/api/feed/follow")' in source
