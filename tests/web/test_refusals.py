"""Every route refuses malformed input cleanly, on SQLite and PostgreSQL (issue 37, finding 2).

A NUL (``%00``), a lone surrogate (``%ED%A0%80``), %-escapes that are not UTF-8, an over-long
id, a bad number or a forged cursor is a 400 or 404 with one line: JSON under /api/, a small
page elsewhere. Never a 500, and never a 503 carrying the driver's message (PostgreSQL refuses
a NUL in text, "bigint out of range": the viewer must refuse such input before the database).
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from viewstore import EventStore
from viewstore.web import create_app

from ..store._helpers import A, C, M, O, S, U
from ._serve import RawAnswer, Served, raw_get, serving

CONVERSATION = "c1"
LONG_EVENT = "e" * 512  # the longest event id there is (viewstore.domain.events.MAX_ID_LENGTH)

#: Routes with a conversation id in their path.
BY_CONVERSATION = [
    "/c/{}",
    "/c/{}/log",
    "/c/{}/audit",
    "/c/{}/condensation/5",
    "/c/{}/e/m1",
    "/api/c/{}/view",
    "/api/c/{}/log",
    "/api/c/{}/diff?from=0&to=1",
    "/api/c/{}/audit",
    "/api/c/{}/condensation/5",
    "/api/c/{}/e/m1",
]
BY_EVENT = [f"/c/{CONVERSATION}/e/{{}}", f"/api/c/{CONVERSATION}/e/{{}}"]
BY_SEQ = [f"/c/{CONVERSATION}/condensation/{{}}", f"/api/c/{CONVERSATION}/condensation/{{}}"]
ANYWHERE = ["/static/{}", "/{}", "/api/{}", "/c/{}/nothing"]

NOT_UTF8 = ["%ED%A0%80", "%FF", "a%FFb", "%C0%AF", "%F4%90%80%80", "%E2%82"]
WITH_NUL = ["%00", "a%00b"]
BAD_IDS = [*NOT_UTF8, *WITH_NUL, "a%0Ab", "%01"]
BAD_NUMBERS = ["x", "-1", "1.5", "%EF%BC%91", "99999999999999999999", "1e3", " ", "0x10"]

#: The query parameters each route reads.
PARAMETERS = {
    "/": ["q", "sort", "order", "offset", "after", "before"],
    "/api/conversations": ["q", "sort", "order", "offset", "after", "before", "limit"],
    f"/c/{CONVERSATION}": ["seq", "first", "log"],
    f"/c/{CONVERSATION}/log": ["seq", "log"],
    f"/api/c/{CONVERSATION}/view": ["seq", "first"],
    f"/api/c/{CONVERSATION}/log": ["seq", "after", "limit"],
    f"/api/c/{CONVERSATION}/diff?to=1": ["from"],
    f"/api/c/{CONVERSATION}/diff?from=0": ["to"],
}
ALWAYS_BAD = [*NOT_UTF8, *WITH_NUL, "x" * 5000]
ODD_VALUES = [*BAD_NUMBERS, "nonsense", "c1.", "c1.e30=", "1:2", "a=1:2"]


def _cursor(parts: list[Any]) -> str:
    text = json.dumps(parts).encode()
    return "c1." + base64.urlsafe_b64encode(text).decode().rstrip("=")


#: Catalogue cursors a client could forge: well-formed, but naming no position the store has.
FORGED = {
    "NUL in the id": ["updated_at", True, "2020-01-01T00:00:00+00:00", "a\x00b"],
    "lone surrogate in the id": ["updated_at", True, "2020-01-01T00:00:00+00:00", "a\ud800b"],
    "over-long id": ["updated_at", True, "2020-01-01T00:00:00+00:00", "x" * 300],
    "count past bigint": ["version", True, 10**30, "a"],
    "count below bigint": ["version", True, -(10**30), "a"],
    "time before UTC's year 1": ["updated_at", True, "0001-01-01T00:00:00+14:00", "a"],
    "time past UTC's year 9999": ["updated_at", True, "9999-12-31T23:59:59-14:00", "a"],
}
SORT_WORD = {"updated_at": "updated", "version": "events"}


@pytest.fixture
def store_url(db_url: str) -> str:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append(
            CONVERSATION,
            [
                S("S"),
                U("U"),
                A("a0", "tc0", "r0"),
                O("o0", "tc0"),
                C("c0", ["a0", "o0"], "one call", 2),
                M("m1", "done"),
            ],
        )
        store.append("long-ids", [S("S"), M(LONG_EVENT, "a long id")])
    return db_url


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(store_url), raise_server_exceptions=False) as opened:
        yield opened


def _problem(path: str, status: int, content_type: str, body: bytes) -> str | None:
    """What is wrong with this answer to a malformed request, or None."""
    if status not in (400, 404):
        return f"{path[:60]}: {status} {body[:200]!r}"
    text = body.decode()
    message = _message(path, content_type, text)
    if message is None or "\n" in message:
        return f"{path[:60]}: not a one-line error: {text[:200]!r}"
    if "Traceback" in text or "database" in message or "psycopg" in message:
        return f"{path[:60]}: the server's insides: {message[:200]!r}"
    return None


def _message(path: str, content_type: str, text: str) -> str | None:
    """The error message of a JSON error (under /api/) or of an error page, or None."""
    if path.startswith("/api/"):
        if not content_type.startswith("application/json") or "\n" in text:
            return None
        found = json.loads(text)
        message = found.get("error")
        return message if isinstance(message, str) and found.get("status") else None
    if not content_type.startswith("text/html") or '<p class="message">' not in text:
        return None
    return text.split('<p class="message">', 1)[1].split("</p>", 1)[0]


def _check(client: TestClient, paths: list[str], *, refused_with: int | None = None) -> None:
    problems = []
    for path in paths:
        answer = client.get(path)
        if answer.status_code == 200 and refused_with is None:
            continue
        problem = _problem(path, answer.status_code, answer.headers["content-type"], answer.content)
        if problem is None and refused_with not in (None, answer.status_code):
            problem = f"{path[:60]}: {answer.status_code}, not {refused_with}"
        if problem is not None:
            problems.append(problem)
    assert problems == []


def test_bad_path_ids_on_every_route(client: TestClient) -> None:
    paths = [route.format(bad) for route in BY_CONVERSATION for bad in BAD_IDS]
    paths += [route.format(bad) for route in BY_EVENT for bad in [*BAD_IDS, "e" * 513]]
    paths += [route.format(bad) for route in ANYWHERE for bad in [*NOT_UTF8, *WITH_NUL]]
    _check(client, paths, refused_with=400)
    too_long = [route.format("x" * 256) for route in BY_CONVERSATION]
    _check(client, too_long, refused_with=400)


def test_bad_seqs_in_the_path(client: TestClient) -> None:
    _check(client, [route.format(bad) for route in BY_SEQ for bad in [*BAD_NUMBERS, *WITH_NUL]])


def test_bad_query_parameters_on_every_route(client: TestClient) -> None:
    def url(route: str, name: str, value: str) -> str:
        return f"{route}{'&' if '?' in route else '?'}{name}={value}"

    always = [url(r, n, v) for r, names in PARAMETERS.items() for n in names for v in ALWAYS_BAD]
    _check(client, always, refused_with=400)
    odd = [url(r, n, v) for r, names in PARAMETERS.items() for n in names for v in ODD_VALUES]
    _check(client, odd)  # a clean 4xx, or a page (``q=nonsense`` finds nothing)


@pytest.mark.parametrize("what", FORGED)
def test_forged_catalogue_cursors(client: TestClient, what: str) -> None:
    order, descending, *rest = FORGED[what]
    sort, direction = SORT_WORD[order], "desc" if descending else "asc"
    paths = []
    for route in ("/", "/api/conversations"):
        after = _cursor([order, descending, *rest])
        before = _cursor([order, not descending, *rest])  # a cursor of the reverse order
        paths += [
            f"{route}?sort={sort}&order={direction}&after={after}",
            f"{route}?sort={sort}&order={direction}&before={before}",
        ]
    _check(client, paths, refused_with=400)
    assert "cursor" in client.get(paths[-1]).json()["error"]


def test_the_longest_event_id_can_be_viewed(client: TestClient) -> None:
    """Event ids run to 512 characters; the viewer once refused any past 400."""
    assert client.get(f"/c/long-ids/e/{LONG_EVENT}").status_code == 200
    assert client.get(f"/api/c/long-ids/e/{LONG_EVENT}").json()["event_id"] == LONG_EVENT


@pytest.fixture
def served(store_url: str) -> Iterator[Served]:
    with serving(store_url) as running:
        yield running


def _raw_problem(target: str, answer: RawAnswer) -> str | None:
    return _problem(target, answer.status, answer.headers["content-type"], answer.body)


def test_on_a_real_server(served: Served) -> None:
    """The bytes reach uvicorn exactly as written here (no client re-encodes them), and
    nothing the requests do leaves a traceback in the server's log."""
    targets = [
        "/c/%00",
        "/c/%ED%A0%80",
        "/c/%FF",
        "/api/c/%C0%AF/view",
        f"/api/c/{CONVERSATION}/e/%ED%A0%80",
        f"/c/{CONVERSATION}/e/a%00",
        "/static/%00",
        "/static/%FF",
        "/nothing%00",
        "/?q=%FF",
        "/api/conversations?q=%ED%A0%80",
        "/api/conversations?after=" + _cursor(FORGED["NUL in the id"]),
        "/api/feed/follow?after=%00",
        "/api/feed/follow?after=nonsense",
        "/api/feed/follow?after=" + "9" * 5000 + ":1",
    ]
    problems = [_raw_problem(t, raw_get(served, t.encode())) for t in targets]
    for last_event_id in ["nonsense", "9" * 5000 + ":1", "1:2:3", "\xed\xa0\x80"]:
        answer = raw_get(served, b"/api/feed/follow", {"Last-Event-ID": last_event_id})
        problems.append(_raw_problem("/api/feed/follow", answer))
    assert [p for p in problems if p is not None] == []
    assert [line for line in served.log_lines() if "Traceback" in line] == []


def _hang_up(served: Served, target: bytes, *, after: float, read_first: bool) -> None:
    """Ask for ``target`` and reset the connection ``after`` seconds later (a closed tab)."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: viewer.local\r\n\r\n")
        if read_first:
            sock.recv(1)
        time.sleep(after)


def test_a_client_that_hangs_up_costs_one_log_line_at_most(served: Served, store_url: str) -> None:
    before = len(served.log_lines())
    targets = [b"/", f"/c/{CONVERSATION}".encode(), f"/api/c/{CONVERSATION}/audit".encode()]
    hang_ups = 0
    for target in [*targets, b"/api/feed/follow"]:
        for after, read_first in ((0.0, False), (0.01, False), (0.3, True)):
            _hang_up(served, target, after=after, read_first=read_first)
            hang_ups += 1
    with EventStore(store_url) as store:  # a stream cut while entries come
        with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(b"GET /api/feed/follow HTTP/1.1\r\nHost: viewer.local\r\n\r\n")
            sock.recv(1)
            for i in range(5):
                store.append("busy", [M(f"b{i}", "again")])
        hang_ups += 1
    time.sleep(1.0)  # let the server notice the last ones
    assert httpx.get(served.base + "/", timeout=30).status_code == 200  # still serving
    written = served.log_lines()[before:]
    assert [line for line in written if "Traceback" in line] == []
    assert len(written) <= hang_ups, written
