"""``viewstore --masking FILE`` and ``viewstore masking show|try|list`` (docs/masking.md), as a
user runs them: the installed command in a subprocess, on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from viewstore import EventStore

from ..ops._helpers import message
from ._process import error_line, run

KEY = "sk-proj-" + "Zz0" * 9
RULES = """
use = ["common"]

[[rules]]
name = "ticket"
pattern = 'TCK-[0-9]{6}'
paths = ["/llm_message/content/*/text"]
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    rules = tmp_path / "masking.toml"
    rules.write_text(RULES)
    events = tmp_path / "events.jsonl"
    lines = [message("m1", f"key {KEY}, ticket TCK-123456"), message("m2", "plain")]
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return rules, events


def test_an_append_masks_by_the_rules_and_list_shows_what(
    empty_db_url: str, files: tuple[Path, Path]
) -> None:
    rules, events = files
    with EventStore(empty_db_url) as store:
        store.create_schema()
    done = run("--masking", str(rules), "append", "c", str(events), url=empty_db_url)
    assert done.returncode == 0, done.stderr
    with EventStore(empty_db_url) as store:
        stored = store.events("c")[0].payload_json
        assert KEY not in stored and "TCK-123456" not in stored
        assert "[masked:llm-api-key]" in stored and "[masked:ticket]" in stored
    listed = run("masking", "list", "c", url=empty_db_url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "seq 1 m1: /llm_message/content/0/text llm-api-key x1; "
        "/llm_message/content/0/text ticket x1"
    ]
    shown = json.loads(run("masking", "list", "c", "--json", url=empty_db_url).stdout)
    assert shown[0]["masked"][1] == {
        "path": "/llm_message/content/0/text",
        "rule": "ticket",
        "count": 1,
    }
    # Without the rules the same command stores what it is given.
    plain = run("append", "d", str(events), url=empty_db_url)
    assert plain.returncode == 0, plain.stderr
    assert run("masking", "list", "d", url=empty_db_url).stdout == "nothing in d was masked\n"
    assert run("verify", url=empty_db_url).returncode == 0


def test_show_and_try_read_the_rules_and_store_nothing(
    tmp_path: Path, files: tuple[Path, Path]
) -> None:
    rules, events = files
    shown = run("masking", "show", str(rules))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == (
        "ticket: TCK-[0-9]{6}  (/llm_message/content/*/text; every kind)"
    )
    tried = run("masking", "try", str(rules), str(events), cwd=tmp_path)
    assert tried.stdout.splitlines() == [
        "m1: /llm_message/content/0/text llm-api-key x1; /llm_message/content/0/text ticket x1",
        "m2: nothing to mask",
    ]
    tried = run("masking", "try", str(rules), "-", "--json", input=events.read_text())
    as_json = json.loads(tried.stdout)
    assert KEY not in json.dumps(as_json) and as_json[1]["masked"] == []
    assert list(tmp_path.glob("*.db")) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[rules]]\nname = 'a'\npattern = '('", "rule 'a': pattern is not a regular expression"),
        ("[[rules]]\nname = 'a'\npattern = 'x'\npaths = ['/tool_call_id']", "envelope"),
        ("use = ['rare']", "no preset 'rare'"),
    ],
)
def test_a_bad_rules_file_is_one_line_and_exit_2(
    tmp_path: Path, files: tuple[Path, Path], text: str, expected: str
) -> None:
    rules = tmp_path / "bad.toml"
    rules.write_text(text)
    _good, events = files
    url = f"sqlite:///{tmp_path / 'store.db'}"
    for args in (
        ["masking", "show", str(rules)],
        ["--masking", str(rules), "append", "c", str(events)],
    ):
        assert expected in error_line(run(*args, url=url))
    missing = run("--masking", str(tmp_path / "missing.toml"), "append", "c", str(events), url=url)
    assert "cannot read the masking rules" in error_line(missing)
    assert not (tmp_path / "store.db").exists()
