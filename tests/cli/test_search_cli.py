"""``viewstore search`` (docs/search.md) as a user runs it: the installed command, on a SQLite
file and on PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

from viewstore import EventStore

from ..ops._helpers import condensation, message
from ._process import error_line, run


def test_search_prints_hits_pages_and_json(empty_db_url: str, tmp_path: Path) -> None:
    with EventStore(empty_db_url) as store:
        store.create_schema()
        store.append("c1", [message(f"m{i}", f"deploy step {i} with git push") for i in range(3)])
        store.append("c1", condensation("k1", ("m0",), summary="pushed", offset=0))
        store.append("c2", message("n1", "git status only"))
    done = run("search", "git push", url=empty_db_url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("c1  seq ") for line in lines)
    assert {line.split("  ")[3] for line in lines} == {"live", "-"}
    first = run("search", "git push", "--limit", "2", url=empty_db_url).stdout.splitlines()
    assert first[-1].startswith("next page: --after s1.")
    cursor = first[-1].split()[-1]
    rest = run("search", "git push", "--limit", "2", "--after", cursor, url=empty_db_url)
    assert len(rest.stdout.splitlines()) == 1
    forgotten = run("search", "git", "--window", "forgotten", "--json", url=empty_db_url)
    assert [h["event_id"] for h in json.loads(forgotten.stdout)["hits"]] == ["m0"]
    only = run("search", "git", "--conversation", "c2", url=empty_db_url)
    assert only.stdout.startswith("c2  seq 1  MessageEvent  live  git status only")
    none = run("search", "nowhere", url=empty_db_url)
    assert (none.returncode, none.stdout, none.stderr) == (0, "", "no events hold every word\n")


def test_a_bad_search_is_one_line_and_exit_2(sqlite_url: str) -> None:
    with EventStore(sqlite_url) as store:
        store.create_schema()
    assert "needs a word" in error_line(run("search", "--", "--", url=sqlite_url))
    assert "cursor a search returned" in error_line(
        run("search", "git", "--after", "x", url=sqlite_url)
    )
    assert "not an ISO 8601" in error_line(run("search", "git", "--since", "soon", url=sqlite_url))
