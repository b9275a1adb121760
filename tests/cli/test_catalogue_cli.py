"""`viewstore list`, `viewstore feed [--follow]`, full ids in tables, and `--json` meaning the
same everywhere; each runs the installed command in a subprocess."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.demo import run_demo
from viewstore.store.cursors import feed_cursor as encode_cursor
from viewstore.store.records import SourceInfo

from ._helpers import OPENHANDS_HEX
from ._process import SCRIPT, clean_env, error_line, run

LONG = "9cd8a8fb-0000-4000-8000-00000000000000000001"  # longer than any column it once had


def _store(url: str) -> None:
    with EventStore(url) as store:
        run_demo(store, LONG)
        store.append("short", [{"kind": "MessageEvent", "id": "m1", "source": "user"}])


def test_list_shows_what_an_agent_server_said(db_url: str) -> None:
    _store(db_url)
    with EventStore(db_url) as store:
        store.hand_over("short", "sandbox-7")  # appended above, it had no source
        store.save_conversation_info(
            SourceInfo("short", "sandbox-7", title="Tidy the repo", execution_status="running")
        )
    done = run("list", url=db_url)
    assert (done.returncode, done.stderr) == (0, "")
    assert "server" in done.stdout.splitlines()[1]
    lines = done.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("short "))
    assert lines[row].split()[-2:] == ["sandbox-7", "running"]
    assert lines[row + 1] == "  Tidy the repo"
    records = {r["id"]: r for r in json.loads(run("list", "--json", url=db_url).stdout)}
    assert (records["short"]["agent_server"], records["short"]["title"]) == (
        "sandbox-7",
        "Tidy the repo",
    )
    assert records[LONG]["agent_server"] is None


def test_list_fits_100_columns_and_says_dash_where_nothing_is_known(db_url: str) -> None:
    """Each conversation: its id whole, last activity with its zone, events, view length,
    agent server and status ("-" where no server said) on one line; its title (the server's,
    else the first user message) under it, cut to what the width leaves."""
    uuid = "conversation-0f3c2a9e5b1d4c7a9e2f8a6"  # 36 characters, as a UUID with dashes
    words = "please look at the failing parser test and make it pass " * 4
    with EventStore(db_url) as store:
        store.create_schema()
        store.save_conversation_info(
            SourceInfo("fleet-1", "sandbox-7", title="Tidy the repo", execution_status="running")
        )
        store.append("fleet-1", [{"kind": "MessageEvent", "id": "m1", "source": "user"}])
        message = {"role": "user", "content": [{"type": "text", "text": words}]}
        store.append(
            uuid, [{"kind": "MessageEvent", "id": "m1", "source": "user", "llm_message": message}]
        )
        store.append("bare", [{"kind": "MessageEvent", "id": "m1", "source": "agent"}])
    done = run("list", "--order", "id", url=db_url)  # not a terminal: 100 columns
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[0] == "3 conversation(s)"
    assert max(len(line) for line in lines) <= 100, done.stdout
    header = lines[1].split()
    assert header[:3] == ["id", "last", "activity"] and header[-2:] == ["server", "status"]
    rows = {
        line.split()[0]: (line, lines[i + 1])
        for i, line in enumerate(lines)
        if i > 1 and not line.startswith(" ")
    }
    assert set(rows) == {uuid, "bare", "fleet-1"}
    row, title = rows[uuid]
    assert row.startswith(uuid + " ")  # whole
    assert row.split()[-2:] == ["-", "-"]  # no agent server, no status
    when = row.split()[1:3]
    assert when[1].endswith("Z") and datetime.fromisoformat(" ".join(when))  # zone named
    assert title.startswith("  please look at the failing") and title.endswith("…")
    assert len(title) == 100  # the title has the width the other columns leave
    row, title = rows["fleet-1"]
    assert row.split()[-2:] == ["sandbox-7", "running"] and title == "  Tidy the repo"
    assert rows["bare"][1] == "  -"  # no title, no user message
    # a wider terminal (COLUMNS, as a shell exports it) gives the title more room
    wide = subprocess.run(
        [str(SCRIPT), "--url", db_url, "list", "--order", "id"],
        capture_output=True,
        text=True,
        env=clean_env(COLUMNS="160"),
        check=False,
        timeout=120,
    )
    longest = max(wide.stdout.splitlines(), key=len)
    assert len(longest) == 160 and longest.startswith("  please look")


def test_list_prints_every_record_with_full_ids(db_url: str) -> None:
    _store(db_url)
    done = run("list", url=db_url)
    assert (done.returncode, done.stderr) == (0, "")
    assert LONG in done.stdout
    assert "2 conversation(s)" in done.stdout
    lines = done.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if LONG in line)
    assert "16" in lines[row].split() and "9" in lines[row].split()
    assert lines[row + 1].startswith("  ")  # its title line: the demo's first user message
    assert "ConversationStateUpdateEvent" not in done.stdout  # the last kind is --json's

    as_json = run("list", "--json", "--order", "version", "--desc", url=db_url)
    assert as_json.returncode == 0, as_json.stderr
    records = json.loads(as_json.stdout)
    assert [r["id"] for r in records] == [LONG, "short"]
    assert list(records[0]) == [
        "id",
        "created_at",
        "updated_at",
        "version",
        "view_length",
        "unhandled_condensation_request",
        "last_event_kind",
        "title",
        "agent_server",
        "execution_status",
        "llm_model",
        "first_message",
        "display_title",
        "cursor",
    ]
    assert (records[0]["version"], records[0]["view_length"]) == (16, 9)
    assert records[0]["display_title"] == records[0]["first_message"] != None  # noqa: E711

    paged = run("list", "--json", "--limit", "1", "--offset", "1", url=db_url)
    assert [r["id"] for r in json.loads(paged.stdout)] == ["short"]
    longer = run("list", "--json", "--min-view-length", "2", url=db_url)
    assert [r["id"] for r in json.loads(longer.stdout)] == [LONG]
    future = run("list", "--json", "--updated-since", "2999-01-01", url=db_url)
    assert json.loads(future.stdout) == []
    bad = run("list", "--updated-since", "yesterday", url=db_url)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "ISO 8601" in bad.stderr


def test_list_pages_by_cursor(sqlite_url: str) -> None:
    with EventStore(sqlite_url) as store:
        store.create_schema()
        for i in range(5):
            store.append(f"c{i}", [{"kind": "MessageEvent", "id": f"m{j}"} for j in range(i + 1)])
    seen: list[str] = []
    after: list[str] = []
    while True:
        done = run("list", "--order", "version", "--desc", "--limit", "2", *after, url=sqlite_url)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        seen += [line.split()[0] for line in done.stdout.splitlines() if line.startswith("c")]
        nexts = [line for line in done.stdout.splitlines() if line.startswith("next page: ")]
        if not nexts:
            break
        after = ["--after", nexts[0].split()[-1]]
    assert seen == ["c4", "c3", "c2", "c1", "c0"]
    # --json: each record carries its cursor; the last one's is where the next page starts
    first = json.loads(
        run("list", "--json", "--order", "version", "--limit", "2", url=sqlite_url).stdout
    )
    rest = run(
        "list", "--json", "--order", "version", "--after", first[-1]["cursor"], url=sqlite_url
    )
    assert [r["id"] for r in json.loads(rest.stdout)] == ["c2", "c3", "c4"]
    # a cursor of another order, or none at all, is one line
    for cursor in (first[-1]["cursor"], "page-2"):
        bad = run("list", "--order", "updated", "--after", cursor, url=sqlite_url)
        assert bad.returncode != 0 and "Traceback" not in bad.stderr
        assert "after" in error_line(bad)


def test_view_and_events_tables_never_cut_an_id(db_url: str) -> None:
    _store(db_url)
    with EventStore(db_url) as store:
        ids = store.view(LONG).event_ids
    shown = run("view", LONG, url=db_url)  # not a terminal: 80 columns
    assert shown.returncode == 0, shown.stderr
    for event_id in ids:
        assert event_id in shown.stdout
    assert "CondensationSummaryEvent" in shown.stdout
    logged = run("events", LONG, url=db_url)
    with EventStore(db_url) as store:
        for event in store.events(LONG):
            assert event.event_id in logged.stdout


def test_view_json_payloads(db_url: str) -> None:
    _store(db_url)
    plain = json.loads(run("view", LONG, "--json", url=db_url).stdout)
    full = run("view", LONG, "--json", "--payloads", url=db_url)
    assert full.returncode == 0, full.stderr
    document = json.loads(full.stdout)
    assert {k: v for k, v in document.items() if k != "payloads"} == plain
    with EventStore(db_url) as store:
        expected = [json.loads(text) for text in store.view(LONG).payloads]
    assert document["payloads"] == expected
    assert [p["id"] for p in document["payloads"]] == plain["event_ids"]
    alone = run("view", LONG, "--payloads", url=db_url)
    assert alone.returncode == 2 and "--payloads goes with --json" in alone.stderr


def test_stats_text_lists_the_events_per_kind(db_url: str) -> None:
    _store(db_url)
    text = run("stats", url=db_url)
    numbers = json.loads(run("stats", "--json", url=db_url).stdout)
    assert text.returncode == 0, text.stderr
    assert "events by kind:" in text.stdout
    for kind, count in numbers["events_by_kind"].items():
        assert any(line.split() == [kind, str(count)] for line in text.stdout.splitlines()), kind


def test_export_jsonl_json_prints_the_summary(db_url: str, tmp_path: Path) -> None:
    _store(db_url)
    out = tmp_path / "c.jsonl"
    done = run("export", LONG, str(out), "--jsonl", "--json", url=db_url)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {"conversation_id": LONG, "events": 16, "path": str(out)}
    assert len(out.read_text(encoding="utf-8").splitlines()) == 16


def test_feed_prints_the_change_feed_and_goes_on_from_a_cursor(sqlite_url: str) -> None:
    _store(sqlite_url)
    done = run("feed", url=sqlite_url)
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert len(lines) == 17
    cursor, conversation, seq, kind, event_id = lines[0].split("\t")
    assert (cursor, conversation, seq, kind) == (
        encode_cursor(0, 1),
        LONG,
        "1",
        "SystemPromptEvent",
    )
    with EventStore(sqlite_url) as store:
        assert event_id == store.events(LONG)[0].event_id
    last = json.loads(
        run("feed", "--json", "--limit", "16", url=sqlite_url).stdout.splitlines()[-1]
    )
    assert (last["conversation_id"], last["seq"]) == (LONG, 16)
    rest = run("feed", "--json", "--after", last["cursor"], url=sqlite_url)
    assert [json.loads(line)["event_id"] for line in rest.stdout.splitlines()] == ["m1"]
    bad = run("feed", "--after", "not-a-cursor", url=sqlite_url)
    assert "malformed feed cursor" in error_line(bad)


def _follow(url: str, *args: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """``viewstore feed --follow ARGS`` in a process of its own, and the lines it prints, read
    in a thread so that a silent follower fails a test instead of hanging it. The process
    takes SIGINT as from a terminal: a shell that runs this suite in the background (a CI
    script's `&`) starts it with SIGINT ignored, and a child inherits an ignored signal, not a
    handled one."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        follower = subprocess.Popen(
            [str(SCRIPT), "--url", url, "feed", "--follow", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    lines: queue.Queue[str] = queue.Queue()
    stream = follower.stdout
    assert stream is not None

    def read() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    return follower, lines


def test_feed_follow_prints_events_as_they_commit(sqlite_url: str) -> None:
    _store(sqlite_url)
    start = json.loads(run("feed", "--json", url=sqlite_url).stdout.splitlines()[-1])["cursor"]
    follower, lines = _follow(sqlite_url, "--json", "--after", start, "--interval", "0.1")
    try:
        time.sleep(1.0)  # it is polling an unchanged feed now
        with EventStore(sqlite_url) as store:
            store.append("later", [{"kind": "MessageEvent", "id": "x1"}])
            store.append("later", [{"kind": "MessageEvent", "id": "x2"}])
        got = [json.loads(lines.get(timeout=60)) for _ in range(2)]
        assert [(e["conversation_id"], e["event_id"]) for e in got] == [
            ("later", "x1"),
            ("later", "x2"),
        ]
        assert follower.poll() is None  # still following
    finally:
        follower.terminate()
        follower.wait(timeout=30)


def test_feed_follow_wakes_on_a_commit_and_ctrl_c_exits_quietly(db_url: str) -> None:
    """PostgreSQL: with 30 s between polls, a commit still arrives within seconds (the
    notification wakes it); both backends: SIGINT (Ctrl-C) ends it with status 0 and nothing
    on stderr."""
    _store(db_url)
    postgres = db_url.startswith("postgresql")
    follower, lines = _follow(db_url, "--interval", "30" if postgres else "0.1")
    try:
        for _ in range(17):  # what the store holds already (the --after test reads the same)
            lines.get(timeout=60)
        time.sleep(1.0)  # waiting now
        with EventStore(db_url) as store:
            store.append("later", [{"kind": "MessageEvent", "id": "x1"}])
        line = lines.get(timeout=15 if postgres else 60)
        assert line.rstrip("\n").split("\t")[1:] == ["later", "1", "MessageEvent", "x1"]
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
        assert follower.stderr is not None
        assert follower.stderr.read() == ""
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait(timeout=30)


def test_stats_fast_counts_a_small_store(db_url: str) -> None:
    _store(db_url)
    fast = json.loads(run("stats", "--fast", "--json", url=db_url).stdout)
    full = json.loads(run("stats", "--json", url=db_url).stdout)
    for name in ("conversations", "events", "condensations"):
        assert fast[name] == full[name] and fast["exact"][name] is True, name
    assert fast["view_sizes"] is None and fast["events_by_kind"] is None
    text = run("stats", "--fast", url=db_url)
    assert (text.returncode, text.stderr) == (0, "")
    assert text.stdout.splitlines()[0].split() == ["conversations:", "2"]


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_stats_fast_estimates_a_large_postgresql_store(db_url: str) -> None:
    """Above 10,000 rows by the planner's estimate, --fast gives the estimate and says so."""
    _store(db_url)
    with EventStore(db_url) as store, store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO conversations (id, created_at, updated_at, version, "
                "unhandled_request, view_length, pending_tool_calls, in_tool_loop, "
                "last_is_action, last_hash) SELECT 'bulk-' || i, now(), now(), 0, false, 0, "
                "'[]', false, false, 'h' FROM generate_series(1, 30000) AS i"
            )
        )
        conn.execute(text("ANALYZE conversations"))
    fast = json.loads(run("stats", "--fast", "--json", url=db_url).stdout)
    assert fast["exact"] == {"conversations": False, "events": True, "condensations": True}
    assert 27_000 <= fast["conversations"] <= 33_000
    assert fast["events"] == 16 + 1
    lines = run("stats", "--fast", url=db_url).stdout.splitlines()
    assert lines[0].split()[:2] == ["conversations:", "about"]
    assert lines[1].split() == ["events:", "17"]


def test_stats_fast_bounds_a_large_sqlite_store(sqlite_url: str) -> None:
    """Above 10,000 rows SQLite's --fast gives the largest rowid, an upper bound (exact with
    nothing deleted), and says it is not a count."""
    _store(sqlite_url)
    with EventStore(sqlite_url) as store, store.engine.begin() as conn:
        conn.execute(
            text(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000) "
                "INSERT INTO conversations (id, created_at, updated_at, version, "
                "unhandled_request, view_length, pending_tool_calls, in_tool_loop, "
                "last_is_action, last_hash) SELECT 'bulk-' || i, '2026-01-01 00:00:00', "
                "'2026-01-01 00:00:00', 0, 0, 0, '[]', 0, 0, 'h' FROM n"
            )
        )
    fast = json.loads(run("stats", "--fast", "--json", url=sqlite_url).stdout)
    assert fast["exact"] == {"conversations": False, "events": True, "condensations": True}
    assert fast["conversations"] == 30_002
    assert fast["events"] == 16 + 1
    lines = run("stats", "--fast", url=sqlite_url).stdout.splitlines()
    assert lines[0].split()[:2] == ["conversations:", "about"]


def test_the_import_table_shows_ids_whole_in_100_columns(
    db_url: str, openhands_folder: Path
) -> None:
    assert run("init", url=db_url).returncode == 0
    done = run("import", str(openhands_folder), url=db_url)  # not a terminal: 80 columns
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    row = next(line for line in done.stdout.splitlines() if OPENHANDS_HEX in line)
    assert row.split()[:2] == [OPENHANDS_HEX, "15"]
    assert max(len(line.rstrip()) for line in done.stdout.splitlines()) <= 100


def test_refresh_sizes_says_how_many_and_lists_stay_exact(db_url: str) -> None:
    _store(db_url)
    done = run("refresh", url=db_url)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "refreshed the sizes of 2 conversation(s)\n"
    again = run("refresh", "--full", "--json", url=db_url)
    assert (again.returncode, json.loads(again.stdout)) == (0, {"refreshed": 0})
    with EventStore(db_url) as store:
        store.append(
            "short",
            [{"kind": "MessageEvent", "id": f"m{i}", "source": "user"} for i in range(2, 40)],
        )
    listed = json.loads(run("list", "--order", "version", "--desc", "--json", url=db_url).stdout)
    assert [r["id"] for r in listed] == ["short", LONG]
    assert json.loads(run("refresh", "--json", url=db_url).stdout) == {"refreshed": 1}
