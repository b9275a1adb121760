"""``viewstore erase``, ``prune``, ``compact`` and ``retention``, run as a user runs them, on
both backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from viewstore import EventStore

from ..ops._helpers import action, age, condensation, message, observation
from ._process import SCRIPT, clean_env, error_line, run


def _store(url: str, names: list[str]) -> EventStore:
    store = EventStore(url)
    store.create_schema()
    for name in names:
        store.append(name, [message(f"{name}-1"), message(f"{name}-2")])
    return store


def test_erase_prints_the_tombstone(db_url: str) -> None:
    store = _store(db_url, ["a", "b"])
    done = run("erase", "a", "--reason", "asked", "--json", url=db_url)
    assert done.returncode == 0, done.stderr
    tombstone = json.loads(done.stdout)
    assert (tombstone["conversation_id"], tombstone["events"], tombstone["reason"]) == (
        "a",
        2,
        "asked",
    )
    assert store.conversation_ids() == ["b"]
    assert "not found" in error_line(run("erase", "nope", "--reason", "x", url=db_url))
    assert "was erased" in error_line(run("erase", "a", "--reason", "x", url=db_url))
    line = error_line(run("append", "a", "-", url=db_url, input=json.dumps(message("x"))))
    assert "was erased" in line
    store.close()


def test_prune_dry_run_then_prune(db_url: str) -> None:
    store = _store(db_url, ["old1", "old2", "recent"])
    age(store, ["old1", "old2"], days=100)
    dry = run("prune", "--inactive-for", "90d", "--dry-run", url=db_url)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.split() == ["old1", "old2"]
    assert sorted(store.conversation_ids()) == ["old1", "old2", "recent"]
    done = run("prune", "--inactive-for", "90d", "--json", url=db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["erased"] == ["old1", "old2"]
    assert store.conversation_ids() == ["recent"]
    assert store.tombstone("old1").reason == "retention: inactive for 90d"  # type: ignore[union-attr]
    again = run("prune", "--inactive-for", "90d", "--json", url=db_url)
    assert json.loads(again.stdout)["erased"] == []
    store.close()


@pytest.mark.parametrize("period", ["0d", "90", "d", "90y", "-1d", "9999999d"])
def test_prune_refuses_a_bad_period(sqlite_url: str, period: str) -> None:
    _store(sqlite_url, ["a"]).close()
    assert "--inactive-for" in error_line(run("prune", "--inactive-for", period, url=sqlite_url))


def test_a_killed_prune_leaves_whole_conversations_and_a_rerun_finishes(db_url: str) -> None:
    """SIGKILL in the middle of a prune: each conversation is erased whole or not at all
    (every survivor is complete, every tombstone matches a conversation that is gone), and
    running the prune again erases the rest. (``verify`` would flag the survivors' aged
    ``updated_at``: that is how the test makes them inactive.)"""
    names = [f"c{i:03d}" for i in range(60)]
    store = _store(db_url, [])
    for name in names:
        store.append(name, [message(f"{name}-{j}") for j in range(20)])
    age(store, names, days=100)
    process = subprocess.Popen(
        [SCRIPT, "--url", db_url, "prune", "--inactive-for", "90d"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(store.conversation_ids()) > 45:
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    left = store.conversation_ids()
    assert 0 < len(left) < len(names), "the prune was not caught in the middle"
    for name in names:
        assert (name in left) != (store.tombstone(name) is not None), name
    for name in left:
        assert [e.seq for e in store.events(name)] == list(range(1, 21))
        assert store.view(name).event_ids == store.replay(name).event_ids
    done = run("prune", "--inactive-for", "90d", url=db_url)
    assert done.returncode == 0, done.stderr
    assert store.conversation_ids() == []
    assert all(store.tombstone(name) is not None for name in names)
    store.close()


def test_erase_holds_nothing_half_done_when_killed(db_url: str) -> None:
    """SIGKILL during an erase of a long conversation, again and again: it is always there
    whole or gone whole."""
    store = _store(db_url, [])
    store.append("long", [message(f"m{j}") for j in range(3000)])
    code = (
        "import sys\n"
        "from viewstore import EventStore\n"
        "EventStore(sys.argv[1]).erase('long', reason='killed')\n"
    )
    for delay in (0.05, 0.15, 0.3, 0.6, 1.0):
        process = subprocess.Popen([sys.executable, "-c", code, db_url], env=clean_env())
        time.sleep(delay)
        process.kill()
        process.wait()
        if store.tombstone("long") is not None:
            assert store.conversation_ids() == []
            break
        assert store.version("long") == 3000
        assert store.verify("long").ok
    store.close()


def test_fork_creates_a_conversation_sharing_the_prefix(db_url: str) -> None:
    store = _store(db_url, ["src"])
    store.append("src", [message("src-3")])
    done = run("fork", "src", "--at", "2", "--id", "try-2", "--json", url=db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "id": "try-2",
        "source": "src",
        "at_seq": 2,
        "family_id": "src",
        "view_length": 2,
    }
    plain = run("fork", "try-2", "--at", "1", url=db_url)
    assert plain.returncode == 0 and "forked try-2 at seq 1 as" in plain.stdout
    assert [e.event_id for e in store.events("try-2")] == ["src-1", "src-2"]
    assert "at_seq must be a seq of 'src', from 1 to 3" in error_line(
        run("fork", "src", "--at", "9", url=db_url)
    )
    assert "already exists" in error_line(
        run("fork", "src", "--at", "1", "--id", "try-2", url=db_url)
    )
    assert "not found" in error_line(run("fork", "nope", "--at", "1", url=db_url))
    assert "fork(s) that share its events" in error_line(
        run("erase", "src", "--reason", "x", url=db_url)
    )
    store.close()


def test_prune_erases_forks_before_their_source(db_url: str) -> None:
    store = _store(db_url, ["src", "live"])
    store.fork("src", 1, "old-fork")
    store.fork("live", 1, "busy-fork")
    store.append("busy-fork", [message("busy")])
    age(store, ["src", "old-fork", "live"], days=100)
    done = run("prune", "--inactive-for", "90d", "--json", url=db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["erased"] == ["old-fork", "src"]
    assert store.conversation_ids() == ["busy-fork", "live"]  # a live fork keeps its source
    store.close()


def test_redact_prints_the_record_and_refuses_bad_input(db_url: str) -> None:
    store = _store(db_url, ["c"])
    done = run("redact", "c", "c-1", "--reason", "leaked", "--json", url=db_url)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["seq"], record["paths"], record["reason"]) == (1, None, "leaked")
    plain = run("redact", "c", "c-2", "--reason", "r", "--path", "/llm_message/content", url=db_url)
    assert plain.returncode == 0, plain.stderr
    assert "redacted event c-2 (seq 2 of c): /llm_message/content" in plain.stdout
    assert "[redacted]" in store.events("c")[1].payload_json
    assert "has no event 'zz'" in error_line(run("redact", "c", "zz", "--reason", "r", url=db_url))
    assert "part of the envelope" in error_line(
        run("redact", "c", "c-1", "--reason", "r", "--path", "/id", url=db_url)
    )
    assert "nothing left to redact" in error_line(
        run("redact", "c", "c-1", "--reason", "again", url=db_url)
    )
    verified = run("verify", url=db_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    store.close()


EVENTS = 3000


def test_a_killed_redaction_leaves_nothing_half_done(db_url: str) -> None:
    """SIGKILL while a process redacts event after event, again and again: each event is
    redacted whole (record, log and copies) or not at all, and verify passes."""
    store = _store(db_url, [])
    store.append("c", [message(f"m{j}", f"secret {j}") for j in range(EVENTS)])
    code = (
        "import sys\n"
        "from viewstore import EventStore\n"
        "store = EventStore(sys.argv[1])\n"
        "done = {r.event_id for r in store.redactions('c')}\n"
        f"for j in range({EVENTS}):\n"
        "    if f'm{j}' not in done:\n"
        "        store.redact('c', f'm{j}', reason='killed')\n"
    )
    counts = [0]
    for delay in (0.0, 0.1, 0.2, 0.3, 0.5, 0.8):
        process = subprocess.Popen([sys.executable, "-c", code, db_url], env=clean_env())
        # Kill once this round has redacted something: a fixed delay from the start raced the
        # child's imports, which took over 2 s on a loaded machine (no kill landed mid-way).
        deadline = time.monotonic() + 120
        while len(store.redactions("c")) <= counts[-1] and process.poll() is None:
            assert time.monotonic() < deadline, "the redacting process made no progress"
            time.sleep(0.02)
        time.sleep(delay)
        process.kill()
        process.wait()
        redacted = {r.event_id for r in store.redactions("c")}
        view = {e.id: e.payload_json for e in store.view("c").events}
        for event in store.events("c"):
            gone = "[redacted]" in event.payload_json
            assert gone == (event.event_id in redacted), event.event_id
            assert view[event.event_id] == event.payload_json
        assert store.verify("c").ok
        counts.append(len(redacted))
    assert any(0 < count < EVENTS for count in counts[1:]), f"no kill landed mid-way: {counts}"
    store.close()


def _condensed(store: EventStore, name: str, pairs: int) -> None:
    """``pairs`` tool calls with outputs of about 3 kB, all forgotten by one condensation."""
    events: list[dict[str, object]] = [message(f"{name}-m")]
    for i in range(pairs):
        events.append(action(f"{name}-a{i}", f"{name}-t{i}", llm_response_id=f"{name}-r{i}"))
        events.append(_output(f"{name}-o{i}", f"{name}-t{i}", f"{name}-a{i}"))
    forgotten = [str(event["id"]) for event in events[1:]]
    events.append(condensation(f"{name}-k", forgotten, summary="ran them"))
    store.append(name, events)


def _output(eid: str, call: str, action_id: str) -> dict[str, object]:
    return {
        **observation(eid, call, action_id),
        "observation": {
            "content": [{"type": "text", "text": f"{eid} output line\n" * 150}],
            "kind": "TerminalObservation",
        },
    }


def test_compact_dry_run_then_compact(db_url: str) -> None:
    store = _store(db_url, [])
    _condensed(store, "c", 3)
    views = store.view("c").event_ids
    dry = run("compact", "--older-than", "0d", "--dry-run", url=db_url)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would compact 3 event(s) of 1 conversation(s), ")
    assert "left 3 too small to free bytes" in dry.stdout
    assert store.redactions("c") == []
    assert (
        json.loads(run("compact", "--older-than", "30d", "--json", url=db_url).stdout)["events"]
        == 0
    )  # appended just now
    done = run("compact", "c", "--older-than", "0d", "--json", url=db_url)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["events"], report["small"], report["policy"]) == (3, 3, "compact after 0d")
    assert report["bytes_freed"] > 3 * 2000
    assert store.view("c").event_ids == views and store.verify().ok
    again = json.loads(run("compact", "--older-than", "0d", "--json", url=db_url).stdout)
    assert again["events"] == 0
    store.close()


@pytest.mark.parametrize("period", ["90", "d", "90y", "-1d", "9999999d"])
def test_compact_refuses_a_bad_period(sqlite_url: str, period: str) -> None:
    _store(sqlite_url, ["a"]).close()
    assert "--older-than" in error_line(run("compact", "--older-than", period, url=sqlite_url))


def test_compact_of_a_missing_conversation_is_one_line(sqlite_url: str) -> None:
    _store(sqlite_url, ["a"]).close()
    assert "not found" in error_line(run("compact", "nope", "--older-than", "0d", url=sqlite_url))


def test_a_killed_compaction_leaves_whole_events_and_a_rerun_finishes(db_url: str) -> None:
    """SIGKILL in the middle of a compaction of the whole store: each event is whole or
    compacted with its record, never half (``verify`` checks every one), views do not change,
    and running it again compacts the rest."""
    store = _store(db_url, [])
    names = [f"c{i:02d}" for i in range(30)]
    for name in names:
        _condensed(store, name, 10)
    views = {name: store.view(name).event_ids for name in names}
    process = subprocess.Popen(
        [SCRIPT, "--url", db_url, "compact", "--older-than", "0d"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    deadline = time.monotonic() + 60

    def compacted() -> int:
        with store.engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM redactions")).scalar_one())

    while time.monotonic() < deadline and compacted() < 60:
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert 0 < compacted() < 300, "the compaction was not caught in the middle"
    assert store.verify().ok
    for name in names:
        records = {r.event_id for r in store.redactions(name)}
        for event in store.events(name):
            assert ("[compacted]" in event.payload_json) == (event.event_id in records), name
    done = run("compact", "--older-than", "0d", "--json", url=db_url)
    assert done.returncode == 0, done.stderr
    assert compacted() == 300
    assert {name: store.view(name).event_ids for name in names} == views
    assert store.verify().ok
    store.close()


_POLICY = """
[default]
compact_after = "0d"
delete_idle_after = "90d"

[conversations.keep]
delete_idle_after = "never"

[sources.sandbox]
keep_last = 5
"""


def test_retention_show_and_run(db_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "retention.toml"
    policy.write_text(_POLICY)
    store = _store(db_url, ["old", "keep"])
    _condensed(store, "c", 2)
    age(store, ["old", "keep"], days=100)
    shown = run("retention", "show", "--policy", str(policy), url=db_url)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "default: compact after 0s, redact after never, delete idle after 90d",
        "keep: compact after 0s, redact after never, delete idle after never",
        "source sandbox: keep the last 5",
    ]
    dry = run("retention", "run", "--policy", str(policy), "--dry-run", "--json", url=db_url)
    assert json.loads(dry.stdout)["erased"] == ["old"]
    assert sorted(store.conversation_ids()) == ["c", "keep", "old"]
    done = run("retention", "run", "--policy", str(policy), url=db_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("erased 1 conversation(s); compacted 2 event(s)")
    assert sorted(store.conversation_ids()) == ["c", "keep"]
    assert len(store.redactions("c")) == 2
    store.close()


@pytest.mark.parametrize(
    ("content", "args", "says"),
    [
        ('[default]\ncompact_after = "30y"', [], "default.compact_after"),
        ("[default", [], "not TOML"),
        (None, [], "cannot read the policy"),
        ('[default]\ncompact_after = "30d"', ["--every", "0s"], "--every"),
        ('[default]\ncompact_after = "30d"', ["--every", "soon"], "--every"),
    ],
)
def test_retention_refuses_a_bad_policy_in_one_line(
    sqlite_url: str, tmp_path: Path, content: str | None, args: list[str], says: str
) -> None:
    _store(sqlite_url, ["a"]).close()
    policy = tmp_path / "retention.toml"
    if content is not None:
        policy.write_text(content)
    done = run("retention", "run", "--policy", str(policy), *args, url=sqlite_url)
    assert done.returncode == 2 and says in error_line(done), done.stderr
