"""Many open ``/api/feed/follow`` streams on a real ``viewstore serve`` (issue 37, finding 3).

They once held a PostgreSQL connection each (12 streams: 1 -> 17 backends), so a few dozen
open pages exhausted ``max_connections``. Now the streams of a process share one listening
connection, their reads go through the store's bounded pool, a killed listening connection
is opened again, and past ``VIEWSTORE_SERVE_MAX_STREAMS`` a stream is refused with a 503 and
``Retry-After``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, create_engine, text

from tests.ops._helpers import settled_feed
from viewstore import EventStore
from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.database.engine import create_engine_for
from viewstore.web import create_app
from viewstore.web.feed_stream import MAX_STREAMS_ENV, RETRY_AFTER

from ._serve import Served, raw_get, serving
from ._sse import WAIT, Refused, events, message, stream

STREAMS = 24  # more than the pool holds: before, each stream's own connection showed here
#: The viewer's engine keeps SQLAlchemy's default pool: 5 connections, 10 more under load.
POOL_MOST = 5 + 10
OURS = "viewstore-test"  # the test's own connections (appends, these counts), left uncounted


@dataclass(frozen=True)
class Backends:
    total: int  # client backends of the database, the test's own left out
    listening: list[int]  # the pids of those that listen


def _watch(url: str) -> Engine:
    return create_engine(url, connect_args={"application_name": OURS}, pool_size=1, max_overflow=0)


def _backends(watch: Engine) -> Backends:
    with watch.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT pid, query LIKE 'LISTEN%' FROM pg_stat_activity "
                "WHERE datname = current_database() AND backend_type = 'client backend' "
                "AND application_name <> :ours"
            ),
            {"ours": OURS},
        ).all()
    return Backends(len(rows), sorted(pid for pid, listens in rows if listens))


def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


@contextmanager
def _appender(url: str) -> Iterator[EventStore]:
    engine = create_engine_for(url, connect_args={"application_name": OURS})
    with EventStore(engine) as store:
        store.create_schema()
        yield store


def test_streams_share_one_listening_connection(fresh_pg_url: str) -> None:
    watch = _watch(fresh_pg_url)
    with _appender(fresh_pg_url) as store, serving(fresh_pg_url) as served:
        store.append("old", [message("o1")])
        # Another test's open transaction can hold o1 back from the feed for a moment; a
        # stream that starts before o1 shows would then follow from before it.
        settled_feed(store, 1)
        assert raw_get(served, b"/api/conversations").status == 200  # the pool is open
        before = _backends(watch)
        assert before.listening == []
        with ExitStack() as opened:
            crowd = [opened.enter_context(stream(served.base + "/api/feed/follow"))]
            _until("the first stream listens", lambda: len(_backends(watch).listening) == 1)
            crowd += [
                opened.enter_context(stream(served.base + "/api/feed/follow"))
                for _ in range(STREAMS - 1)
            ]
            store.append("new", [message("n1"), message("n2")])
            store.append("other", [message("x1")])
            got = [[d["event_id"] for _, d in events(lines, 3)] for lines in crowd]
            during = _backends(watch)
        assert got == [["n1", "n2", "x1"]] * STREAMS  # each entry once, in the feed's order
        assert len(during.listening) == 1
        assert during.total <= before.total + 1 + POOL_MOST, (before, during)
        _until("the last stream's end closes it", lambda: _backends(watch).listening == [])
    watch.dispose()


def test_a_killed_listening_connection_is_opened_again(fresh_pg_url: str) -> None:
    watch = _watch(fresh_pg_url)
    with _appender(fresh_pg_url) as store, serving(fresh_pg_url) as served:
        with ExitStack() as opened:
            crowd = [
                opened.enter_context(stream(served.base + "/api/feed/follow")) for _ in range(3)
            ]
            _until("one listens", lambda: len(_backends(watch).listening) == 1)
            (killed,) = _backends(watch).listening
            with watch.connect() as conn:
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": killed})
            store.append("while-down", [message("d1")])  # maybe before it listens again
            _until(
                "another connection listens",
                lambda: _backends(watch).listening not in ([], [killed]),
            )
            store.append("after", [message("a1")])
            got = [[d["event_id"] for _, d in events(lines, 2)] for lines in crowd]
            assert len(_backends(watch).listening) == 1
        assert got == [["d1", "a1"]] * 3
        said = [line for line in served.log_lines() if "change feed" in line]
        assert len(said) <= 1, said  # at most a line for the outage, not one per stream
        assert not [line for line in served.log_lines() if "Traceback" in line]
    watch.dispose()


def test_past_the_cap_a_stream_is_refused(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
    with serving(db_url, env={MAX_STREAMS_ENV: "2"}) as served:
        feed = served.base + "/api/feed/follow"
        with stream(feed), stream(feed):
            with pytest.raises(Refused) as refused, stream(feed):
                pass
            assert raw_get(served, b"/api/conversations").status == 200  # pages still served
        assert refused.value.status == 503
        assert refused.value.headers["retry-after"] == str(RETRY_AFTER)
        assert refused.value.body.count(b"\n") == 0
        found = json.loads(refused.value.body)
        assert found["status"] == 503 and "too many open feed streams (2)" in found["error"]
        _until("a closed stream frees its place", lambda: _opens(served))


def _opens(served: Served) -> bool:
    try:
        with stream(served.base + "/api/feed/follow"), stream(served.base + "/api/feed/follow"):
            return True
    except Refused as refused:
        assert refused.status == 503
        return False


@pytest.mark.parametrize("bad", ["0", "-3", "many", "1e3", "99999999999"])
def test_a_bad_cap_is_refused_in_one_line(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv(MAX_STREAMS_ENV, bad)
    with pytest.raises(InvalidArgumentError, match=MAX_STREAMS_ENV) as refused:
        create_app(sqlite_url)
    assert "\n" not in str(refused.value)
    monkeypatch.delenv(MAX_STREAMS_ENV)
    with pytest.raises(InvalidArgumentError, match="max_streams"):
        create_app(sqlite_url, max_streams=0)
