"""Several processes on one conversation: resume in another process, two writers racing,
and a writer killed with SIGKILL at a random moment, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from tests.openhands._agent import OUTPUT, expected_lines, make_agent, sdk_view, store_view
from tests.openhands._checks import assert_linear
from viewstore import EventStore
from viewstore.openhands import open_conversation

ROOT = Path(__file__).resolve().parents[2]
WORKER = [sys.executable, "-m", "tests.openhands._agent"]


def worker(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([*WORKER, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True, **kwargs)


def new_store(url: str) -> EventStore:
    store = EventStore(url)
    store.create_schema()
    return store


def test_resume_in_another_process_and_continue(db_url: str, tmp_path: Path) -> None:
    cid = uuid.uuid4()
    workspace = str(tmp_path / "ws")
    new_store(db_url).close()
    first = worker("run", db_url, str(cid), workspace, "7", "one", "--message", "Start.")
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0
    child_view = json.loads(out.strip().splitlines()[-1])["view"]

    store = EventStore(db_url)  # a new store, same URL
    version = store.version(cid)
    conversation = open_conversation(store, make_agent(4, "two"), workspace, cid, visualizer=None)
    assert sdk_view(conversation) == child_view == store_view(store, cid)
    assert [e.id for e in conversation.state.events] == [e.event_id for e in store.events(cid)]
    conversation.send_message("Go on.")
    conversation.run()
    assert store.version(cid) > version
    assert sdk_view(conversation) == store_view(store, cid)
    lines = (tmp_path / "ws" / OUTPUT).read_text().split()
    assert lines == expected_lines(7, "one") + expected_lines(4, "two")
    assert_linear(store, cid)
    assert store.verify().ok
    store.close()


def test_two_processes_one_wins_each_step(db_url: str, tmp_path: Path) -> None:
    cid = uuid.uuid4()
    workspace = str(tmp_path / "ws")
    store = new_store(db_url)
    opening = open_conversation(store, make_agent(0, "x"), workspace, cid, visualizer=None)
    opening.send_message("Hello.")
    duelists = [
        worker("duel", db_url, str(cid), workspace, name, stdin=subprocess.PIPE)
        for name in ("left", "right")
    ]
    try:
        for round_ in range(4):
            before = store.version(cid)
            for process in duelists:
                assert process.stdin is not None
                process.stdin.write("open\n")
                process.stdin.flush()
            for process in duelists:
                assert process.stdout is not None
                assert process.stdout.readline().strip() == "ready"
            for process in duelists:
                assert process.stdin is not None
                process.stdin.write(f"go {round_}\n")
                process.stdin.flush()
            outcomes = [json.loads(p.stdout.readline()) for p in duelists if p.stdout]
            winners = [o for o in outcomes if o.get("ok")]
            losers = [o for o in outcomes if "conflict" in o]
            assert len(winners) == 1 and len(losers) == 1, outcomes
            assert losers[0]["conflict"][0] == before  # its stale version
            texts = [
                e.payload["llm_message"]["content"][0]["text"]
                for e in store.events(cid, after=before)
                if e.kind == "MessageEvent"
            ]
            assert texts == [f"{winners[0]['name']} round {round_}"]
    finally:
        for process in duelists:
            if process.stdin:
                process.stdin.close()
            process.wait(timeout=60)
    assert_linear(store, cid)
    assert store.verify().ok
    store.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_at_a_random_moment_then_resume(db_url: str, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    cid = uuid.uuid4()
    workspace = str(tmp_path / "ws")
    store = new_store(db_url)
    victim = worker("run", db_url, str(cid), workspace, "40", "k", "--message", "Go.")
    target = rng.randint(3, 60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and victim.poll() is None:
        try:
            if store.version(cid) >= target:
                break
        except LookupError:
            pass
        time.sleep(0.002)
    time.sleep(rng.uniform(0, 0.03))
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    before = [e.event_id for e in store.events(cid)]
    assert before, "the victim wrote nothing before it was killed"

    resumed_store = EventStore(db_url)
    conversation = open_conversation(
        resumed_store, make_agent(3, "after"), workspace, cid, visualizer=None
    )
    # Nothing lost: the resumed SDK sees every stored event, HEAD on the last of them.
    assert [e.id for e in conversation.state.events] == before
    assert sdk_view(conversation)["event_ids"] == resumed_store.resume_view(cid).event_ids
    conversation.send_message("Finish.")
    conversation.run()
    after = [e.event_id for e in resumed_store.events(cid)]
    assert after[: len(before)] == before
    assert len(set(after)) == len(after)
    assert_linear(resumed_store, cid)  # nothing forked off a stale HEAD
    assert resumed_store.verify().ok
    resumed_store.close()
    store.close()
