"""The ingest between real OpenHands agent servers and a real PostgreSQL store.

Every process is the real thing: ``openhands-agent-server`` 1.58 processes (each its own
``conversations_path``, webhooks to the ingest with the Bearer token), ``viewstore ingest``
under uvicorn, PostgreSQL; only the LLM is scripted (``_fleet.ScriptedLLM``: parallel
``think`` calls, ``finish``, the condenser's summaries). After each scenario every stored
conversation equals its agent server's own log (its REST search) in order, exactly once, and
the stored views equal the SDK's views of those events.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.agent_server", reason="openhands.agent_server is not importable")

from viewstore import EventStore, MaskingRules, parse_event

from ._fleet import (
    BIN,
    AgentServer,
    Ingest,
    ScriptedLLM,
    assert_stored_is_a_prefix,
    assert_views_equal_the_sdks,
    free_port,
    start_agent_server,
    stored_equals_server,
    wait_until,
    write_sources,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLM]:
    scripted = ScriptedLLM()
    yield scripted
    scripted.close()


@pytest.fixture
def store_url(fresh_pg_url: str) -> Iterator[str]:
    with EventStore(fresh_pg_url) as store:
        store.create_schema()
    yield fresh_pg_url


@pytest.fixture
def store(store_url: str) -> Iterator[EventStore]:
    with EventStore(store_url) as opened:
        yield opened


@pytest.fixture
def ingest(store_url: str, tmp_path: Path) -> Iterator[Ingest]:
    process = Ingest(store_url, tmp_path / "sources.toml", free_port(), tmp_path / "ingest.log")
    yield process
    process.stop()


@pytest.fixture
def servers() -> Iterator[list[AgentServer]]:
    started: list[AgentServer] = []
    yield started
    for server in started:
        server.stop()


def _converged(store: EventStore, server: AgentServer, conversation: str) -> None:
    wait_until(
        lambda: stored_equals_server(store, server, conversation),
        60,
        f"{server.name}/{conversation} stored as its server has it",
    )
    assert_views_equal_the_sdks(store, server, conversation)


def _start_fleet(
    tmp_path: Path, ingest: Ingest, servers: list[AgentServer], names: list[str], **webhook: Any
) -> list[AgentServer]:
    for name in names:
        servers.append(start_agent_server(name, tmp_path / name, ingest.url, **webhook))
    write_sources(ingest.sources_file, servers)
    return servers


def test_three_agent_servers_one_store(
    tmp_path: Path, llm: ScriptedLLM, ingest: Ingest, servers: list[AgentServer], store: EventStore
) -> None:
    fleet = _start_fleet(tmp_path, ingest, servers, ["alpha", "beta", "gamma"])
    ingest.start()
    runs = [
        (server, server.start_conversation(llm, rounds, condense=condense))
        for server, rounds, condense in [
            (fleet[0], 7, True),
            (fleet[1], 3, False),
            (fleet[2], 7, True),
            (fleet[0], 2, False),
        ]
    ]
    for server, conversation in runs:
        server.wait_finished(conversation)
    for server, conversation in runs:
        _converged(store, server, conversation)
        info = store.conversation_info(conversation)
        assert info is not None and info.source == server.name
        assert info.execution_status == "finished"
        assert info.llm_model == "openai/scripted"
    condensed = [c for _, c in runs if store.condensations(c)]
    assert len(condensed) == 2, "the condenser ran in both long conversations"
    assert store.verify().ok


def test_replayed_duplicated_and_reordered_batches(
    tmp_path: Path, llm: ScriptedLLM, ingest: Ingest, servers: list[AgentServer], store: EventStore
) -> None:
    """The server's webhooks go nowhere; the test posts its events itself, in batches
    replayed, duplicated, reordered and concurrent. The store never holds an event out of
    place, and ends with each once."""
    dead = f"http://127.0.0.1:{free_port()}"
    server = start_agent_server("delta", tmp_path / "delta", dead)
    servers.append(server)
    write_sources(ingest.sources_file, servers)
    ingest.start()
    conversation = server.start_conversation(llm, 6, condense=True)
    server.wait_finished(conversation)
    log = server.events(conversation)
    batches = [log[i : i + 3] for i in range(0, len(log), 3)]
    rng = random.Random(22)
    order = list(range(len(batches)))
    rng.shuffle(order)
    for index in order[: len(order) // 2]:  # reordered: later batches first
        status, answer = ingest.post(f"/events/{conversation}", batches[index], "delta")
        assert status == 200, answer
        stored = assert_stored_is_a_prefix(store, server, conversation)
        assert stored >= sum(len(b) for b in batches[: index + 1])  # the gap was pulled
        status, again = ingest.post(f"/events/{conversation}", batches[index], "delta")
        assert status == 200 and again["appended"] == 0 and again["version"] == stored
    # Every batch at once, each twice, from threads: they serialize through the store.
    answers: list[int] = []

    def post(batch: list[dict[str, Any]]) -> None:
        answers.append(ingest.post(f"/events/{conversation}", batch, "delta")[0])

    threads = [threading.Thread(target=post, args=(b,)) for b in batches * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * len(threads)
    assert stored_equals_server(store, server, conversation)
    assert_views_equal_the_sdks(store, server, conversation)
    # A conversation the server does not have: nothing stored.
    unknown = "f" * 32
    status, answer = ingest.post(f"/events/{unknown}", batches[0], "delta")
    assert status == 409 and "no such conversation" in answer["error"], answer
    assert unknown not in store.conversation_ids()


def test_the_ingest_down_while_the_queue_drops_events(
    tmp_path: Path, llm: ScriptedLLM, ingest: Ingest, servers: list[AgentServer], store: EventStore
) -> None:
    """With the ingest down, a server whose queue holds 4 events drops the older ones; once
    the ingest is up, the next post reveals the gap and the ingest pulls what was dropped."""
    (server,) = _start_fleet(tmp_path, ingest, servers, ["epsilon"], max_queue_size=4)
    conversation = server.start_conversation(llm, 5, condense=False)
    server.wait_finished(conversation)
    assert "Webhook queue exceeded" in server.log_text()  # events were dropped
    ingest.start()
    _converged(store, server, conversation)


def test_the_ingest_killed_mid_run_and_restarted(
    tmp_path: Path, llm: ScriptedLLM, ingest: Ingest, servers: list[AgentServer], store: EventStore
) -> None:
    (server,) = _start_fleet(tmp_path, ingest, servers, ["zeta"])
    ingest.start()
    conversation = server.start_conversation(llm, 12, condense=True)
    wait_until(lambda: assert_stored_is_a_prefix(store, server, conversation) >= 8, 60, "events")
    ingest.kill()
    before = assert_stored_is_a_prefix(store, server, conversation)
    server.wait_finished(conversation)
    # The run may have ended before the kill with every event stored: a second run, started
    # while the ingest is down, makes sure there are events only the restarted ingest can store.
    first_run = len(server.events(conversation))
    server.send_message(conversation, "once more")
    # The message, the finish action and its observation.
    wait_until(lambda: len(server.events(conversation)) >= first_run + 3, 60, "the second run")
    server.wait_finished(conversation)
    ingest.start()
    _converged(store, server, conversation)
    assert len(store.events(conversation)) > before


def test_sync_pulls_a_server_without_webhooks(
    tmp_path: Path, llm: ScriptedLLM, servers: list[AgentServer], store: EventStore, store_url: str
) -> None:
    server = start_agent_server("eta", tmp_path / "eta", None)
    servers.append(server)
    conversations = [server.start_conversation(llm, r, condense=False) for r in (1, 3)]
    for conversation in conversations:
        server.wait_finished(conversation)
    sources = tmp_path / "sources.toml"
    write_sources(sources, servers)
    command = [str(BIN / "viewstore"), "--url", store_url, "sync", "eta"]
    env = {"VIEWSTORE_INGEST_SOURCES": str(sources), "PATH": "/usr/bin:/bin"}
    first = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    for conversation in conversations:
        assert stored_equals_server(store, server, conversation)
        assert_views_equal_the_sdks(store, server, conversation)
    again = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 0 and "eta: 0 event(s) appended" in again.stderr


def test_the_ingest_masks_what_its_rules_find(
    tmp_path: Path, llm: ScriptedLLM, servers: list[AgentServer], store: EventStore, store_url: str
) -> None:
    """``viewstore --masking FILE ingest`` (docs/masking.md): a token a user sent an agent
    server is stored as ``[masked:github-token]``, each event otherwise as the server has it,
    with its record; a pull of the same server afterwards finds its log and the store agree."""
    rules_file = tmp_path / "masking.toml"
    rules_file.write_text('use = ["common"]\n')
    rules = MaskingRules.from_file(rules_file)
    token = "ghp_" + "T0k3n" * 8
    ingest = Ingest(
        store_url,
        tmp_path / "sources.toml",
        free_port(),
        tmp_path / "ingest.log",
        root=("--masking", str(rules_file)),
    )
    [server] = _start_fleet(tmp_path, ingest, servers, ["masker"])
    ingest.start()
    try:
        conversation = server.start_conversation(llm, 1, condense=False)
        server.wait_finished(conversation)
        server.send_message(conversation, f"deploy with {token}, then stop")
        server.wait_finished(conversation)

        def as_masked() -> list[dict[str, Any]]:
            return [
                rules.mask(parse_event(item))[0].payload for item in server.events(conversation)
            ]

        wait_until(
            lambda: [e.payload for e in store.events(conversation)] == as_masked(),
            60,
            "the conversation stored, masked",
        )
    finally:
        ingest.stop()
    stored = store.events(conversation)
    assert not [e.seq for e in stored if token in e.payload_json]
    assert any(token in json.dumps(item) for item in server.events(conversation))
    records = store.masks(conversation)
    assert records and {m.rule for r in records for m in r.masked} == {"github-token"}
    assert_views_equal_the_sdks(store, server, conversation)
    command = [str(BIN / "viewstore"), "--url", store_url, "--masking", str(rules_file)]
    env = {"VIEWSTORE_INGEST_SOURCES": str(ingest.sources_file), "PATH": "/usr/bin:/bin"}
    pulled = subprocess.run(
        [*command, "sync", "masker"], env=env, capture_output=True, text=True, check=False
    )
    assert pulled.returncode == 0 and "masker: 0 event(s) appended" in pulled.stderr, pulled
    assert store.verify().ok
