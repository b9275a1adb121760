"""The trust boundary between agent servers, against real ``openhands-agent-server`` processes.

Two real agent servers (alpha, beta) ran their conversations to the end; the ingest reads them
through ``_faults.FaultyRelay``, which passes every answer on, or rewrites it, holds it back or
hangs, as a broken or hostile server would. The test posts the webhook batches itself (the
servers' own webhooks go nowhere), so each scenario is exact. What must hold:

- a server damages only its own conversations: another server's posts, info and sync for a
  conversation are refused (403) and change nothing, and never wedge the owner;
- a server log that does not extend the stored one is a 409 with nothing written (an event
  dropped, inserted or changed, a hole in the search, another conversation's pages), counted
  in ``/metrics``;
- a slow or hanging server delays only its own posts, each REST call bounded by its timeout.
"""

from __future__ import annotations

import contextlib
import copy
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.agent_server", reason="openhands.agent_server is not importable")

from viewstore import EventStore

from ._faults import FaultyRelay
from ._fleet import (
    BIN,
    TOKEN,
    AgentServer,
    Ingest,
    ScriptedLLM,
    free_port,
    http,
    start_agent_server,
    stored_equals_server,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@dataclass
class Fleet:
    alpha: AgentServer
    beta: AgentServer
    a1: str  # alpha's conversations
    a2: str
    b1: str  # beta's
    log_a1: list[dict[str, Any]]
    log_a2: list[dict[str, Any]]
    log_b1: list[dict[str, Any]]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    llm = ScriptedLLM()
    root = tmp_path_factory.mktemp("trust")
    dead = f"http://127.0.0.1:{free_port()}"  # the servers' own webhooks go nowhere
    alpha = start_agent_server("alpha", root / "alpha", dead)
    beta = start_agent_server("beta", root / "beta", dead)
    try:
        a1 = alpha.start_conversation(llm, 4, condense=False)
        a2 = alpha.start_conversation(llm, 1, condense=False)
        b1 = beta.start_conversation(llm, 2, condense=False)
        for server, conversation in ((alpha, a1), (alpha, a2), (beta, b1)):
            server.wait_finished(conversation)
        yield Fleet(alpha, beta, a1, a2, b1, alpha.events(a1), alpha.events(a2), beta.events(b1))
    finally:
        alpha.stop()
        beta.stop()
        llm.close()


@dataclass
class Site:
    """A fresh store, an ingest process, and a relay in front of each server."""

    store: EventStore
    store_url: str
    ingest: Ingest
    relays: dict[str, FaultyRelay]
    sources_file: Path

    def post(self, source: str, conversation: str, batch: list[dict[str, Any]]) -> Any:
        return self.ingest.post(f"/events/{conversation}", batch, source)

    def events(self, conversation: str) -> list[dict[str, Any]]:
        try:
            return [e.payload for e in self.store.events(conversation)]
        except LookupError:
            return []

    def metrics(self) -> str:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        request = urllib.request.Request(self.ingest.url + "/metrics", headers=headers)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return str(answer.read().decode())


def _write_sources(path: Path, relays: dict[str, FaultyRelay], timeouts: dict[str, float]) -> None:
    lines = []
    for name, relay in relays.items():
        lines += [f"[sources.{name}]", f'url = "{relay.url}"', f'session_api_key = "{relay.key}"']
        if name in timeouts:
            lines.append(f"timeout = {timeouts[name]}")
        lines.append("")
    path.write_text("\n".join(lines))


@contextlib.contextmanager
def _site(
    fleet: Fleet, store_url: str, tmp_path: Path, *extra: str, **timeouts: float
) -> Iterator[Site]:
    with EventStore(store_url) as store:
        store.create_schema()
        relays = {
            "alpha": FaultyRelay(fleet.alpha.url, fleet.alpha.key),
            "beta": FaultyRelay(fleet.beta.url, fleet.beta.key),
        }
        sources = tmp_path / "sources.toml"
        _write_sources(sources, relays, timeouts)
        ingest = Ingest(store_url, sources, free_port(), tmp_path / "ingest.log", extra=extra)
        ingest.start()
        try:
            yield Site(store, store_url, ingest, relays, sources)
        finally:
            ingest.stop()
            for relay in relays.values():
                relay.stop()


@pytest.fixture
def site(fleet: Fleet, fresh_pg_url: str, tmp_path: Path) -> Iterator[Site]:
    with _site(fleet, fresh_pg_url, tmp_path) as opened:
        yield opened


def _refused(answer: tuple[int, Any], status: int, words: str) -> None:
    code, body = answer
    assert code == status, body
    assert body["status"] == status and words in body["error"], body
    assert "\n" not in body["error"]


# --------------------------------------------------------------------------- ownership


def test_a_server_cannot_write_into_or_describe_another_servers_conversation(
    fleet: Fleet, site: Site
) -> None:
    a1, log = fleet.a1, fleet.log_a1
    assert site.post("alpha", a1, log[:6])[0] == 200
    before = site.events(a1)
    info_before = site.store.conversation_info(a1)
    assert info_before is not None and info_before.source == "alpha"
    # beta posts for alpha's conversation: its own events, and then alpha's ids.
    _refused(site.post("beta", a1, fleet.log_b1[:3]), 403, "belongs to agent server 'alpha'")
    _refused(site.post("beta", a1, log[6:9]), 403, "'alpha'")
    # beta's info about alpha's conversation (title replaced), and about one nobody has.
    stolen = {**fleet.alpha.get(f"/api/conversations/{a1}"), "title": "evil-from-beta"}
    _refused(site.ingest.post("/conversations", stolen, "beta"), 403, "'alpha'")
    nobody = {**stolen, "id": "e" * 32}
    _refused(site.ingest.post("/conversations", nobody, "beta"), 409, "no such conversation")
    assert site.events(a1) == before
    assert site.store.conversation_info(a1) == info_before
    assert site.store.conversation_info("e" * 32) is None
    assert "e" * 32 not in site.store.conversation_ids()
    # The owner is not wedged: its next post stores the rest of its log.
    status, answer = site.post("alpha", a1, log[-3:])
    assert status == 200 and answer["version"] == len(log), answer
    assert site.events(a1) == log
    metrics = site.metrics()
    assert 'viewstore_ingest_refusals_total{source="beta",reason="not_owner"} 3' in metrics
    assert 'viewstore_ingest_refusals_total{source="beta",reason="not_prefix"} 1' in metrics


def test_a_hand_over_moves_a_conversation_on_purpose(fleet: Fleet, site: Site) -> None:
    a1, log = fleet.a1, fleet.log_a1
    assert site.post("alpha", a1, log[:4])[0] == 200
    command = [str(BIN / "viewstore"), "--url", site.store_url, "hand-over", a1, "beta"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "owner 'beta' (was 'alpha')" in done.stdout
    _refused(site.post("alpha", a1, log[4:6]), 403, "belongs to agent server 'beta'")
    # beta owns it now, but its server's log is not this conversation's: nothing stored.
    _refused(site.post("beta", a1, log[4:6]), 409, "no such conversation")
    assert site.events(a1) == log[:4]


def test_sync_goes_on_past_a_conversation_it_may_not_touch(fleet: Fleet, site: Site) -> None:
    a1 = fleet.a1
    assert site.post("alpha", a1, fleet.log_a1)[0] == 200
    alpha_info = fleet.alpha.get(f"/api/conversations/{a1}")

    def list_alphas_too(path: str, query: Any, status: int, body: Any) -> tuple[int, Any]:
        if path == "/api/conversations/search" and status == 200:
            body = {**body, "items": [alpha_info, *body["items"]]}
        return status, body

    site.relays["beta"].rewrite = list_alphas_too
    command = [str(BIN / "viewstore"), "--url", site.store_url, "sync", "beta"]
    env = {"VIEWSTORE_INGEST_SOURCES": str(site.sources_file), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert f"{a1}  refused: " in done.stdout and "'alpha'" in done.stdout
    assert f"{fleet.b1}  version " in done.stdout  # beta's own, to the end of its log
    assert "beta: 1 conversation(s) refused" in done.stderr
    assert site.events(a1) == fleet.log_a1
    assert stored_equals_server(site.store, fleet.beta, fleet.b1)
    info = site.store.conversation_info(a1)
    assert info is not None and info.source == "alpha"


# --------------------------------------------------------------------------- the prefix


def _serve_log(log: list[dict[str, Any]], count: int | None = None) -> Callable[..., Any]:
    """A relay rewrite that answers a conversation's search from ``log`` as the agent server
    would (a ``page_id`` is inclusive, an unknown one starts from the top), and its count
    with ``count`` (default: the log's length; a server with an unreadable event counts it
    but its search skips it)."""

    def rewrite(path: str, query: dict[str, list[str]], status: int, body: Any) -> tuple[int, Any]:
        if path.endswith("/events/count"):
            return 200, len(log) if count is None else count
        if path.endswith("/events/search"):
            limit = int(query.get("limit", ["100"])[0])
            ids = [event["id"] for event in log]
            page_id = query.get("page_id", [None])[0]
            start = ids.index(page_id) if page_id in ids else 0
            items = log[start : start + limit]
            after = log[start + limit : start + limit + 1]
            return 200, {"items": items, "next_page_id": after[0]["id"] if after else None}
        return status, body

    return rewrite


def _changed(event: dict[str, Any]) -> dict[str, Any]:
    other = copy.deepcopy(event)
    other["timestamp"] = "2001-01-01T00:00:00"
    return other


Log = list[dict[str, Any]]
#: name -> (alpha's answers for a1, from a1's real log and a2's; the refusal's words).
REWRITES: dict[str, tuple[Callable[[Log, Log], Callable[..., Any]], str]] = {
    "an earlier stored event dropped": (lambda a1, a2: _serve_log(a1[:2] + a1[3:]), "counts"),
    "an event inserted before the stored tail": (
        lambda a1, a2: _serve_log([*a1[:2], a2[-1], *a1[2:]]),
        "counts",
    ),
    "other content under the last stored id": (
        lambda a1, a2: _serve_log([*a1[:5], _changed(a1[5]), *a1[6:]]),
        "other content",
    ),
    "a hole in the search after the tail": (
        lambda a1, a2: _serve_log(a1[:7] + a1[8:], count=len(a1)),
        "skips an event",
    ),
    "another conversation's log": (lambda a1, a2: _serve_log(a2), "not in the agent server's"),
    "the stored tail missing": (
        lambda a1, a2: _serve_log(a1[:5] + a1[6:]),
        "not in the agent server's log",
    ),
}


@pytest.mark.parametrize("fault", sorted(REWRITES))
def test_a_log_that_does_not_extend_the_stored_one_is_refused(
    fleet: Fleet, site: Site, fault: str
) -> None:
    a1, log = fleet.a1, fleet.log_a1
    assert site.post("alpha", a1, log[:6])[0] == 200
    build, words = REWRITES[fault]
    site.relays["alpha"].rewrite = build(log, fleet.log_a2)
    _refused(site.post("alpha", a1, log[9:12]), 409, words)
    assert site.events(a1) == log[:6]
    assert 'source="alpha",reason="not_prefix"} 1' in site.metrics()
    site.relays["alpha"].honest()  # the server mended: the conversation goes on
    assert site.post("alpha", a1, log[9:12])[0] == 200
    assert site.events(a1) == log[:12]


def test_a_first_post_whose_ids_the_servers_pages_lack_is_refused(fleet: Fleet, site: Site) -> None:
    """Nothing stored yet: the pages the server gives for a1 are a2's, none of the posted ids
    in them."""
    site.relays["alpha"].rewrite = _serve_log(fleet.log_a2)
    _refused(site.post("alpha", fleet.a1, fleet.log_a1[:3]), 409, "in neither the store nor")
    assert fleet.a1 not in site.store.conversation_ids()
    assert site.store.conversation_owner(fleet.a1) is None


def test_a_server_paging_in_circles_is_refused(fleet: Fleet, site: Site) -> None:
    log = fleet.log_a1

    def circles(path: str, query: Any, status: int, body: Any) -> tuple[int, Any]:
        if path.endswith("/events/search"):
            return 200, {"items": log[:2], "next_page_id": log[0]["id"]}
        return status, body

    site.relays["alpha"].rewrite = circles
    code, body = site.post("alpha", fleet.a1, log[:3])
    assert code == 409 and ("repeats" in body["error"] or "goes on past" in body["error"])
    assert fleet.a1 not in site.store.conversation_ids()


def test_an_unreadable_event_on_the_servers_disk_is_a_409(
    fleet: Fleet, site: Site, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Six events stored; then alpha's folder is served by a new agent server with one event
    file past the stored tail made unreadable: its search skips it (and says so in its log),
    its count does not. Nothing more is stored from it."""
    log = fleet.log_a1
    assert site.post("alpha", fleet.a1, log[:6])[0] == 200
    root = tmp_path_factory.mktemp("hole")
    shutil.copytree(fleet.alpha.folder / "conversations", root / "conversations")
    # meta.json names the folder the server reads the conversation from: the copy's.
    meta = root / "conversations" / fleet.a1 / "meta.json"
    meta.write_text(meta.read_text().replace(str(fleet.alpha.folder), str(root)))
    # and the lease alpha holds on it would keep the copy's server from loading it
    (root / "conversations" / fleet.a1 / "owner_lease.json").unlink(missing_ok=True)
    events = sorted((root / "conversations" / fleet.a1 / "events").glob("event-*.json"))
    events[_off_the_branch(log, after=6)].write_text("{ not json")
    server = start_agent_server("alpha", root, None)
    try:
        site.relays["alpha"].target = server.url
        _refused(site.post("alpha", fleet.a1, log[9:12]), 409, "skips an event")
        assert site.events(fleet.a1) == log[:6]
    finally:
        server.stop()
    assert "Skipping unreadable event" in server.log_text()


def _off_the_branch(log: list[dict[str, Any]], after: int) -> int:
    """The position of an event past ``after`` that is not on the path from the last event
    to the root (parent ids; none: the one before): the agent server loads a conversation by
    reading that path, so only such an event can be unreadable in a conversation it still
    serves (its search then skips it)."""
    where = {event["id"]: index for index, event in enumerate(log)}
    on_path: set[int] = set()
    index: int | None = len(log) - 1
    while index is not None:
        on_path.add(index)
        parent = log[index].get("parent_id")
        if parent == "__root__" or (parent is None and index == 0):
            index = None
        else:
            index = where[parent] if parent is not None else index - 1
    off = [i for i in range(after, len(log)) if i not in on_path]
    assert off, "every event is on the branch: no hole the server would still serve"
    return off[0]


# --------------------------------------------------------------------------- isolation


def test_a_hanging_server_delays_only_its_own_posts(
    fleet: Fleet, fresh_pg_url: str, tmp_path: Path
) -> None:
    with _site(
        fleet, fresh_pg_url, tmp_path, "--source-threads", "2", "--source-queue", "4", alpha=60
    ) as current:
        relay = current.relays["alpha"]
        relay.hang()
        answers: list[int] = []

        def post(batch: list[dict[str, Any]]) -> None:
            answers.append(current.post("alpha", fleet.a1, batch)[0])

        threads = [threading.Thread(target=post, args=(fleet.log_a1[:3],)) for _ in range(4)]
        for thread in threads:
            thread.start()
        _wait(lambda: relay.held == 2, "two of alpha's posts at its server, two waiting")
        # alpha's queue is full: a fifth post is answered at once, and beta's goes through.
        _refused(current.post("alpha", fleet.a1, fleet.log_a1[:3]), 503, "try again later")
        status, answer = current.post("beta", fleet.b1, fleet.log_b1)
        assert status == 200 and answer["version"] == len(fleet.log_b1), answer
        assert relay.held == 2 and answers == []  # alpha's are all still waiting
        relay.honest()
        for thread in threads:
            thread.join(60)
        assert answers == [200] * 4
        assert current.events(fleet.a1) == fleet.log_a1[:3]


def test_each_rest_call_has_a_deadline(fleet: Fleet, fresh_pg_url: str, tmp_path: Path) -> None:
    """A server that never answers, and one that answers a byte every 0.2 s (no single read
    waits long, so a socket timeout alone would never fire): each post ends with a 502 within
    the source's timeout (1.5 s) per call, not when the server is done."""
    with _site(fleet, fresh_pg_url, tmp_path, alpha=1.5) as current:
        relay = current.relays["alpha"]
        relay.hang()
        started = time.monotonic()
        _refused(current.post("alpha", fleet.a1, fleet.log_a1[:3]), 502, "agent server alpha")
        assert time.monotonic() - started < 10  # bounded by the source's timeout, not hung
        relay.honest()
        relay.trickle = 0.2
        started = time.monotonic()
        _refused(current.post("alpha", fleet.a1, fleet.log_a1[:3]), 502, "time limit")
        assert time.monotonic() - started < 10
        assert current.events(fleet.a1) == []
        current.relays["alpha"].honest()
        assert current.post("alpha", fleet.a1, fleet.log_a1[:3])[0] == 200


# --------------------------------------------------------------------------- clean refusals


@pytest.mark.parametrize(
    ("event_id", "words"),
    [("\\ud800", "lone surrogate"), ("a\\u0000b", "not allowed"), ("x" * 600, "the limit is 512")],
)
def test_bad_ids_are_a_400_on_postgresql(
    fleet: Fleet, site: Site, event_id: str, words: str
) -> None:
    body = f'[{{"id": "{event_id}", "kind": "MessageEvent"}}]'.encode()
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Viewstore-Source": "alpha"}
    answer = http("POST", f"{site.ingest.url}/events/{fleet.a1}", body, headers)
    _refused(answer, 400, words)
    assert fleet.a1 not in site.store.conversation_ids()


def test_a_client_that_hangs_up_mid_body_costs_one_log_line(fleet: Fleet, site: Site) -> None:
    for _ in range(5):
        with socket.create_connection(("127.0.0.1", site.ingest.port), timeout=5) as sock:
            head = (
                f"POST /events/{fleet.a1} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {TOKEN}\r\nX-Viewstore-Source: alpha\r\n"
                "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
            )
            sock.sendall(head.encode() + b'[{"id": "e1", "kin')
        time.sleep(0.2)
    assert site.post("alpha", fleet.a1, fleet.log_a1[:3])[0] == 200  # still serving
    site.ingest.stop()
    text = site.ingest.log_path.read_text()
    assert "Traceback" not in text, text
    assert len([line for line in text.splitlines() if "hung up" in line]) <= 5


def _wait(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
