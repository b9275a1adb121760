"""The CLI commands through click's CliRunner (and the demo as a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from viewstore import EventStore
from viewstore.demo import demo_events
from viewstore.store.event_store import alembic_config

from ._helpers import failed_with_one_line, invoke, one_line_error, run_viewstore

VIEW_KEYS = [
    "conversation_id",
    "version",
    "event_ids",
    "manipulation_indices",
    "unhandled_condensation_request",
]


def _jsonl(events: list[dict[str, object]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_demo_builds_a_conversation_and_can_rerun(db_url: str) -> None:
    first = invoke(db_url, "demo")
    assert first.exit_code == 0, first.output
    assert "CondensationSummaryEvent" in first.stdout
    assert "unhandled condensation request: no" in first.stdout
    second = invoke(db_url, "demo", "--json")
    assert second.exit_code == 0
    view = json.loads(second.stdout)
    assert list(view) == VIEW_KEYS
    assert view["version"] == 16
    assert any(i.endswith("-summary") for i in view["event_ids"])
    with EventStore(db_url) as store:
        assert len(store.conversation_ids()) == 2  # a fresh id each run
        assert store.verify().ok
    named = invoke(db_url, "demo", "--conversation", "d1")
    again = invoke(db_url, "demo", "--conversation", "d1")
    assert named.exit_code == again.exit_code == 0
    assert "already exists" in again.stdout


def test_demo_console_script_on_a_fresh_sqlite_file(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "viewstore"
    env = {**os.environ, "VIEWSTORE_URL": f"sqlite:///{tmp_path / 'demo.db'}"}
    done = subprocess.run(
        [str(script), "demo"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "manipulation indices [0, 1, 2, 3, 4, 6, 8, 9]" in done.stdout
    assert (tmp_path / "demo.db").is_file()


def test_init_then_append_view_events_indices(db_url: str, tmp_path: Path) -> None:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert json.loads(invoke(db_url, "init", "--json").stdout) == {"revision": head}
    events = demo_events()
    path = tmp_path / "demo.jsonl"
    path.write_text(_jsonl(events[:9]), encoding="utf-8")
    appended = invoke(db_url, "append", "c1", str(path), "--expected-version", "0", "--json")
    assert appended.exit_code == 0, appended.output
    assert json.loads(appended.stdout)["version"] == 9
    rest = invoke(db_url, "append", "c1", "-", "--json", input=_jsonl(events[9:]))
    assert json.loads(rest.stdout)["version"] == 16
    retry = invoke(db_url, "append", "c1", "-", "--json", input=_jsonl(events[9:]))
    assert json.loads(retry.stdout)["appended"] == []

    with EventStore(db_url) as store:
        live, at9, resume = store.view("c1"), store.view("c1", as_of=9), store.resume_view("c1")
    view = json.loads(invoke(db_url, "view", "c1", "--json").stdout)
    assert view == live.to_dict()
    assert json.loads(invoke(db_url, "view", "c1", "--as-of", "9", "--json").stdout) == (
        at9.to_dict()
    )
    assert at9.unhandled_condensation_request
    assert json.loads(invoke(db_url, "view", "c1", "--resume", "--json").stdout) == (
        resume.to_dict()
    )
    table = invoke(db_url, "view", "c1")
    assert table.exit_code == 0
    assert "(end of view)" in table.stdout and "✂ 9" in table.stdout

    listed = json.loads(
        invoke(db_url, "events", "c1", "--after", "3", "--limit", "2", "--json").stdout
    )
    assert [e["seq"] for e in listed] == [4, 5]
    assert [e["payload"] for e in listed] == events[3:5]
    assert "ActionEvent" in invoke(db_url, "events", "c1").stdout

    indices = json.loads(invoke(db_url, "indices", "c1", "--json").stdout)
    assert indices["manipulation_indices"] == live.manipulation_indices
    plain = invoke(db_url, "indices", "c1", "--as-of", "9").stdout.split()
    assert [int(i) for i in plain] == at9.manipulation_indices


def test_stats(db_url: str) -> None:
    invoke(db_url, "demo", "--conversation", "a")
    invoke(db_url, "demo", "--conversation", "b")
    numbers = json.loads(invoke(db_url, "stats", "--json").stdout)
    assert numbers["conversations"] == 2
    assert numbers["events"] == 32
    assert numbers["condensations"] == 2
    assert numbers["view_sizes"] == {"min": 9, "mean": 9.0, "max": 9, "total": 18}
    assert numbers["events_by_kind"]["AgentErrorEvent"] == 2
    assert "conversations: 2" in invoke(db_url, "stats").stdout


def test_verify_finds_tampering_and_rebuild_repairs_it(db_url: str) -> None:
    invoke(db_url, "demo", "--conversation", "a")
    ok = invoke(db_url, "verify", "--json")
    assert ok.exit_code == 0
    assert json.loads(ok.stdout)["ok"] is True
    engine = create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM manipulation_indices WHERE position = 2"))
    finally:
        engine.dispose()
    bad = invoke(db_url, "verify", "a")
    assert bad.exit_code == 1
    assert "PROBLEMS" in bad.stdout
    assert invoke(db_url, "verify", "--json").exit_code == 1
    rebuilt = invoke(db_url, "rebuild", "--json")
    assert json.loads(rebuilt.stdout) == {"rebuilt": 1}
    assert invoke(db_url, "verify").exit_code == 0
    assert invoke(db_url, "rebuild", "a").exit_code == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["view", "nope"], "not found"),
        (["view", "a", "--as-of", "99"], "as_of"),
        (["events", "nope"], "not found"),
        (["export", "nope", "out"], "not found"),
    ],
)
def test_user_errors_exit_2_with_one_line(db_url: str, args: list[str], needle: str) -> None:
    invoke(db_url, "demo", "--conversation", "a")
    result = invoke(db_url, *args)
    assert result.exit_code == 2
    assert needle in one_line_error(result)


def test_append_errors(sqlite_url: str, tmp_path: Path) -> None:
    invoke(sqlite_url, "init")
    events = demo_events()
    lines = [json.dumps(e) for e in events[:3]] + ["", '{"kind": "MessageEvent"}']
    result = invoke(sqlite_url, "append", "c", "-", input="\n".join(lines))
    assert result.exit_code == 2
    assert "<stdin>: line 5:" in one_line_error(result)
    garbage = tmp_path / "bad.jsonl"
    garbage.write_text(json.dumps(events[0]) + "\n{oops\n", encoding="utf-8")
    result = invoke(sqlite_url, "append", "c", str(garbage))
    assert result.exit_code == 2
    assert f"{garbage}: line 2: not valid JSON" in one_line_error(result)
    twice = "\n".join([json.dumps(events[0]), json.dumps(events[1]), json.dumps(events[0])])
    result = invoke(sqlite_url, "append", "c", "-", input=twice)
    assert "line 3" in one_line_error(result)
    with EventStore(sqlite_url) as store:
        assert store.conversation_ids() == []
    invoke(sqlite_url, "append", "c", "-", input=json.dumps(events[0]))
    conflict = invoke(
        sqlite_url, "append", "c", "-", "--expected-version", "0", input=json.dumps(events[1])
    )
    assert conflict.exit_code == 2
    assert "is at version 1, expected 0" in one_line_error(conflict)
    missing = invoke(sqlite_url, "append", "c", str(tmp_path / "missing.jsonl"))
    assert missing.exit_code == 2


def test_usage_errors_exit_2(sqlite_url: str) -> None:
    invoke(sqlite_url, "demo", "--conversation", "a")
    both = invoke(sqlite_url, "view", "a", "--resume", "--as-of", "1")
    assert both.exit_code == 2
    assert "cannot be combined" in both.stderr
    assert invoke(sqlite_url, "view").exit_code == 2
    assert invoke(sqlite_url, "nonsense").exit_code == 2
    assert invoke(sqlite_url, "events", "a", "--limit", "-1").exit_code == 2


def test_missing_schema_says_run_init(empty_db_url: str) -> None:
    result = invoke(empty_db_url, "view", "anything")
    assert result.exit_code == 2
    assert "run `viewstore init`" in one_line_error(result)
    assert invoke(empty_db_url, "stats").exit_code == 2


def test_bad_url_is_bad_input() -> None:
    result = invoke("nosuchdb://x", "stats")
    assert result.exit_code == 2
    assert "does not run on 'nosuchdb' databases" in one_line_error(result)
    result = invoke("not a url", "stats")
    assert result.exit_code == 2
    assert "bad database URL" in one_line_error(result)


def test_a_bare_path_as_url_is_answered_with_the_url_to_write(tmp_path: Path) -> None:
    """`--url x.db` (a path, not a URL) says what the URL is, in its own words, and creates
    nothing, whether the command would read or create a store; `--help` says so first."""
    (tmp_path / "events.jsonl").write_text('{"kind": "MessageEvent", "id": "m1"}\n')
    for args in (["list"], ["init"], ["append", "c", "events.jsonl"]):
        done = run_viewstore("x.db", *args, cwd=tmp_path)
        line = failed_with_one_line(done)
        assert "bad database URL 'x.db'" in line and "sqlite:///x.db" in line, args
        assert "SQLAlchemy" not in line
        assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"], args
    assert "A bare path is not one" in " ".join(invoke("x.db", "--help").output.split())


def test_url_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner  # noqa: PLC0415

    from viewstore.cli import cli  # noqa: PLC0415

    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("VIEWSTORE_URL", url)
    result = CliRunner().invoke(cli, ["demo", "--conversation", "env"], catch_exceptions=False)
    assert result.exit_code == 0
    with EventStore(url) as store:
        assert store.conversation_ids() == ["env"]


def test_live_and_resume_views_of_a_reference_case(db_url: str, vectors_dir: Path) -> None:
    """A condensation that cuts a tool batch: the live view keeps the rest of the batch, the
    resume view (property enforcement) drops it, and verify notes the difference."""
    case = vectors_dir / "micro" / "m13_partial_batch_cascade"
    expected = json.loads(case.with_suffix(".expected.json").read_text(encoding="utf-8"))
    invoke(db_url, "init")
    appended = invoke(db_url, "append", "m13", str(case.with_suffix(".jsonl")))
    assert appended.exit_code == 0, appended.output
    live = json.loads(invoke(db_url, "view", "m13", "--json").stdout)
    assert live["event_ids"] == expected["incremental"]["view_ids"]
    assert live["manipulation_indices"] == expected["incremental"]["manipulation_indices"]
    resume = json.loads(invoke(db_url, "view", "m13", "--resume", "--json").stdout)
    assert resume["event_ids"] == expected["view_ids"]
    assert resume["manipulation_indices"] == expected["manipulation_indices"]
    assert live["event_ids"] != resume["event_ids"]
    checked = invoke(db_url, "verify", "m13")
    assert checked.exit_code == 0
    assert "resume view drops" in checked.stdout
