"""Agent servers on the store, the real thing: ``openhands-agent-server`` 1.58 processes started
with ``--import-modules viewstore.openhands.on_store``, the real SDK and tools, a scripted
OpenAI-compatible LLM (parallel tool calls, a condenser), PostgreSQL and SQLite.

No server here keeps anything on its disk that another needs: a killed server's folder is
wiped, and another server continues its conversation from the store alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openhands.agent_server", reason="openhands.agent_server is not importable")

from viewstore import EventStore

from ..ingest._fleet import (
    BIN,
    ScriptedLLM,
    assert_views_equal_the_sdks,
    http,
    start_agent_server,
    wait_until,
)
from ._servers import (
    SentViews,
    assert_stored_equals_served,
    calls_and_results_of_request,
    calls_and_results_of_view,
    post_message,
    start_on_store,
    stopped,
)

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    scripted = ScriptedLLM()
    yield scripted
    scripted.close()


def _store_at(url: str) -> EventStore:
    store = EventStore(url)
    store.create_schema()
    return store


def _first_message(llm: ScriptedLLM, marker: str) -> str:
    return next(first for first, _ in llm.requests if marker in first)


def _terminal_call_stored(store: EventStore, conversation: str) -> bool:
    if store.server_conversation(conversation) is None:
        return False
    return any(
        e.payload.get("kind") == "ActionEvent" and e.payload.get("tool_name") == "terminal"
        for e in store.events(conversation)
    )


@pytest.mark.postgres
def test_a_killed_runner_is_taken_over_and_the_run_finishes(
    llm: ScriptedLLM, fresh_pg_url: str, tmp_path: Path
) -> None:
    """Three servers on one PostgreSQL. The runner is SIGKILLed in the middle of a tool batch
    and its folder wiped; a server asked while the lease lives is refused and writes nothing;
    once it expires another server takes the conversation over and finishes the run. The
    stored log is that server's log, exactly once; verify is clean; the views are the SDK's;
    and every LLM request after the takeover carries exactly the stored view's calls and
    results."""
    store = _store_at(fresh_pg_url)
    a, b, c = (start_on_store(name, tmp_path, fresh_pg_url) for name in "ABC")
    with stopped(a, b, c):
        conversation = a.start_conversation(llm, 12, condense=True, sleep_at=9)
        wait_until(lambda: _terminal_call_stored(store, conversation), 120, "the long call")
        time.sleep(0.5)  # the batch's first result lands; the second call sleeps on
        sent = SentViews(llm, store)
        sent.watch(_first_message(llm, "sleep_at=9"), conversation)
        a.kill()
        shutil.rmtree(a.folder)
        before = store.events(conversation)
        base_before = store.base_state(conversation)

        status, body = post_message(c, conversation, "from C while A's lease lives")
        assert status == 409, (status, body)
        assert "is being run by agent server 'A" in body["detail"]
        assert store.events(conversation) == before
        assert store.base_state(conversation) == base_before

        def taken_over() -> bool:
            status, body = post_message(b, conversation, "continue")
            assert status in (200, 201, 409), (status, body)
            return status in (200, 201)

        wait_until(taken_over, 30, "B to take the conversation over", interval=0.5)
        b.wait_finished(conversation)

        length = assert_stored_equals_served(store, b, conversation)
        assert length > len(before)
        assert store.verify(conversation).conversations[0].problems == []
        assert_views_equal_the_sdks(store, b, conversation)
        texts = [
            e.payload for e in store.events(conversation) if e.payload.get("kind") == "MessageEvent"
        ]
        assert not any("from C" in str(t) for t in texts)
        row = store.server_conversation(conversation)
        assert row is not None and row.generation == 2  # one takeover
        assert "took conversation" in b.log_text() and "over from A" in b.log_text()

        assert sent.seen, "no LLM request after the takeover"
        for (request, view), resumed in zip(sent.seen, sent.resumed, strict=True):
            sent_items = calls_and_results_of_request(request)
            stored = calls_and_results_of_view(view)
            why = (sent_items, stored, calls_and_results_of_view(resumed))
            # Every result the LLM got is the stored view's, in its order, and so is every
            # call it got. The SDK sends no call without its result; once in about ten runs
            # it also left out the call of an answered result of the killed batch (kept in
            # the view), so the calls are checked as an ordered part of the view's.
            results = [item for item in stored if item[0] == "result"]
            assert [item for item in sent_items if item[0] == "result"] == results, why
            assert _ordered_part(sent_items, stored), why


def _ordered_part(part: list[tuple[str, str]], whole: list[tuple[str, str]]) -> bool:
    remaining = iter(whole)
    return all(item in remaining for item in part)


def test_two_servers_asked_at_once_one_runs(llm: ScriptedLLM, tmp_path: Path) -> None:
    """Two servers on one SQLite file, each sent a message for the same idle conversation at
    the same moment: one runs it, the other answers 409 and its message is stored nowhere."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = _store_at(url)
    a, b = (start_on_store(name, tmp_path, url) for name in "AB")
    with stopped(a, b):
        conversation = a.start_conversation(llm, 2, condense=False)
        a.wait_finished(conversation)
        wait_until(lambda: store.server_conversation(conversation).runner is None, 30, "idle")
        answers: dict[str, tuple[int, object]] = {}
        start = threading.Barrier(2)

        def ask(server_name: str) -> None:
            server = a if server_name == "A" else b
            start.wait()
            answers[server_name] = post_message(server, conversation, f"from {server_name}")

        threads = [threading.Thread(target=ask, args=(name,)) for name in "AB"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(status for status, _ in answers.values())
        assert statuses in ([200, 409], [201, 409]), answers
        winner = next(name for name, (status, _) in answers.items() if status != 409)
        loser = "B" if winner == "A" else "A"
        (a if winner == "A" else b).wait_finished(conversation)
        texts = " ".join(
            str(e.payload)
            for e in store.events(conversation)
            if e.payload.get("kind") == "MessageEvent"
        )
        assert f"from {winner}" in texts and f"from {loser}" not in texts
        assert_stored_equals_served(store, a if winner == "A" else b, conversation)


def test_a_server_restarted_five_times_on_an_empty_disk_keeps_every_conversation(
    llm: ScriptedLLM, tmp_path: Path
) -> None:
    """One server, restarted five times, its folder wiped each time: it lists, counts, pages
    and serves every conversation from the store, continues one, and a deletion forgets the
    conversation in the servers' listing but keeps its events."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = _store_at(url)
    server = start_on_store("A", tmp_path, url)
    with stopped(server):
        conversations = [server.start_conversation(llm, 2, condense=False) for _ in range(3)]
        for conversation in conversations:
            server.wait_finished(conversation)
        logs = {cid: [e.event_id for e in store.events(cid)] for cid in conversations}
    for _ in range(5):
        shutil.rmtree(server.folder)
        server = start_on_store("A", tmp_path, url)
        with stopped(server):
            assert server.get("/api/conversations/count") == 3
            first = server.get("/api/conversations/search?limit=2&sort_order=CREATED_AT")
            rest = server.get(
                f"/api/conversations/search?limit=2&sort_order=CREATED_AT&page_id={first['next_page_id']}"
            )
            listed = [item["id"].replace("-", "") for item in first["items"] + rest["items"]]
            assert sorted(listed) == sorted(conversations) and rest["next_page_id"] is None
            # a page reads its base states at once; one conversation's GET reads its own
            for item in first["items"] + rest["items"]:
                assert item == server.get(f"/api/conversations/{item['id']}")
            finished = server.get("/api/conversations/count?execution_status=finished")
            assert finished == 3
            for cid in conversations:
                assert [e["id"] for e in server.events(cid)] == logs[cid]
                assert server.get(f"/api/conversations/{cid}/events/count") == len(logs[cid])
    server = start_on_store("A", tmp_path, url)
    with stopped(server):
        server.send_message(conversations[0], "once more")
        server.wait_finished(conversations[0])
        assert_stored_equals_served(store, server, conversations[0])
        assert len(store.events(conversations[0])) > len(logs[conversations[0]])
        status, _ = http(
            "DELETE", f"{server.url}/api/conversations/{conversations[1]}", headers=server.headers
        )
        assert status == 200
        assert server.get("/api/conversations/count") == 2
        assert [e.event_id for e in store.events(conversations[1])] == logs[conversations[1]]


def test_a_conversation_imported_from_a_plain_server_continues_on_the_store(
    llm: ScriptedLLM, tmp_path: Path
) -> None:
    """A conversation run on a plain disk-backed server, its folder imported with `viewstore
    import`, continues on a store-backed server that never saw it: the stored log grows from
    the imported one (nothing repeated), equals the new server's log, and the server now lists
    it."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = _store_at(url)
    plain = start_agent_server("P", tmp_path / "P", None)
    with stopped(plain):
        conversation = plain.start_conversation(llm, 2, condense=False)
        plain.wait_finished(conversation)
        before = [e["id"] for e in plain.events(conversation)]
    folder = tmp_path / "P" / "conversations" / conversation
    done = subprocess.run(
        [str(BIN / "viewstore"), "--url", url, "import", str(folder)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert [e.event_id for e in store.events(conversation)] == before
    server = start_on_store("S", tmp_path, url)
    with stopped(server):
        assert server.get("/api/conversations/count") == 0  # not run by a store-backed one yet
        server.send_message(conversation, "continue on the store")
        server.wait_finished(conversation)
        length = assert_stored_equals_served(store, server, conversation)
        assert length > len(before)
        assert [e.event_id for e in store.events(conversation)][: len(before)] == before
        assert server.get("/api/conversations/count") == 1
        assert store.verify(conversation).conversations[0].problems == []


def test_a_stored_conversation_moves_to_a_plain_server(llm: ScriptedLLM, tmp_path: Path) -> None:
    """The other way: a conversation run on a store-backed server, written by `viewstore export
    --agent-server` into a plain server's conversations_path, is listed and served by that
    server as the store has it, and continues there."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = _store_at(url)
    server = start_on_store("S", tmp_path, url)
    with stopped(server):
        conversation = server.start_conversation(llm, 2, condense=False)
        server.wait_finished(conversation)
    stored = [e.event_id for e in store.events(conversation)]
    conversations_path = tmp_path / "P" / "conversations"
    target = str(conversations_path)
    done = subprocess.run(
        [str(BIN / "viewstore"), "--url", url, "export", "--agent-server", conversation, target],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (conversations_path / conversation / "meta.json").is_file()
    plain = start_agent_server("P", tmp_path / "P", None)
    with stopped(plain):
        assert plain.get("/api/conversations/count") == 1
        assert [e["id"] for e in plain.events(conversation)] == stored
        plain.send_message(conversation, "continue on a plain server")
        plain.wait_finished(conversation)
        assert [e["id"] for e in plain.events(conversation)][: len(stored)] == stored
        assert len(plain.events(conversation)) > len(stored)


def test_a_goal_loop_left_running_is_recorded_interrupted_on_load(
    llm: ScriptedLLM, tmp_path: Path
) -> None:
    """A server loading a conversation marks a goal status still active (its loop died with
    its server) interrupted, as a plain server does; the store-backed one finds that status
    with one query (viewstore.openhands.server_internals) instead of walking the log back."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = _store_at(url)
    server = start_on_store("A", tmp_path, url)
    with stopped(server):
        conversation = server.start_conversation(llm, 1, condense=False)
        server.wait_finished(conversation)
    (last,) = store.events(conversation)[-1:]
    goal = {
        "active": True,
        "status": "running",
        "iteration": 1,
        "max_iterations": 3,
        "objective": "finish the task",
        "verdict": None,
    }
    left = {
        "id": str(uuid.uuid4()),  # the SDK's event file names want its kind of id
        "timestamp": last.payload["timestamp"],
        "source": "environment",
        "key": "goal",
        "value": goal,
        "kind": "ConversationStateUpdateEvent",
    }
    if "parent_id" in last.payload:
        left["parent_id"] = last.event_id
    store.append(conversation, [left], expected_version=store.version(conversation))
    server = start_on_store("B", tmp_path, url)
    with stopped(server):
        server.send_message(conversation, "go on")
        server.wait_finished(conversation)
        assert_stored_equals_served(store, server, conversation)
    payloads = [e.payload for e in store.events(conversation)]
    after = payloads[[p["id"] for p in payloads].index(left["id"]) + 1 :]
    goals = [p["value"] for p in after if p.get("key") == "goal"]
    assert goals and goals[0]["status"] == "interrupted" and goals[0]["active"] is False
    assert goals[0]["objective"] == "finish the task"
    assert store.last_state_update(conversation, "goal")["value"]["status"] == "interrupted"


def test_a_server_on_a_masking_store_never_stores_a_token(llm: ScriptedLLM, tmp_path: Path) -> None:
    """``VIEWSTORE_MASKING_RULES`` in a store-backed server's environment (docs/masking.md): a
    token a user sends is stored as ``[masked:github-token]`` with its record; another server,
    on an empty disk, continues the conversation from the store, and what its LLM is sent
    holds the mark, not the token."""
    rules = tmp_path / "masking.toml"
    rules.write_text('use = ["common"]\n')
    token = "ghp_" + "S3rv" * 10
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = _store_at(url)
    env = {"VIEWSTORE_IDLE_SECONDS": "2", "VIEWSTORE_MASKING_RULES": str(rules)}
    first = start_agent_server("A", tmp_path / "A", None, on_store=url, store_env=env)
    with stopped(first):
        conversation = first.start_conversation(llm, 1, condense=False)
        first.wait_finished(conversation)
        first.send_message(conversation, f"use {token} for the push")
        first.wait_finished(conversation)
    assert not [e.seq for e in store.events(conversation) if token in e.payload_json]
    [record] = store.masks(conversation)
    assert [m.rule for m in record.masked] == ["github-token"]
    opening = next(e for e in store.events(conversation) if e.kind == "MessageEvent")
    marker = str(opening.payload["llm_message"]["content"][0]["text"])
    sent_before = len(llm.requests)
    shutil.rmtree(first.folder)
    second = start_agent_server("B", tmp_path / "B", None, on_store=url, store_env=env)
    with stopped(second):
        second.send_message(conversation, "once more")
        second.wait_finished(conversation)
    resent = [json.dumps(r) for first_text, r in llm.requests[sent_before:] if first_text == marker]
    assert resent and all(token not in r for r in resent)
    assert any("[masked:github-token]" in r for r in resent)
    assert store.verify(conversation).ok
