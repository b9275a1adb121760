"""A store built by the code of revision 0016, then migrated to head by this code, reads as one
built fresh at head by the same calls (issue 37, item 1): every conversation's view, its views
as of every seq, indices and request flag, its resume views, which ids are in a view, its log,
its forks, the analyst views; and it verifies. The history has condensations (with and
without a summary, forgetting events forks inherited), requests, redactions (whole events and
paths), forks at a source's present and inside its shared prefix, forks of forks of forks; then
more of the same calls by this code once migrated.

The store is built by the very code of that revision, taken from this repository's history
(``git archive``) and run in a process of its own: a store taken down to 0016 by the
downgrades would only show what they write back."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from viewstore import EventStore

from ..store._helpers import A, C, M, O, R, U, layout_url
from ..store.test_view_rows import rich_history
from ._migrating import assert_reads_replay, killed_and_racing, migrated_and_fresh, stamped
from .test_migration_0022 import CLEARED, HEAD, analysts, long_history

REPO = Path(__file__).resolve().parents[2]
#: The last commit whose newest revision is 0016 (the next one added revision 0017).
CODE_0016 = "6009558"

CALLS_AT_0016: list[list[Any]] = [
    ["append", "rich", rich_history()],
    ["append", "rich", [A("a2", "t2", "r2"), O("o2", "t2"), C("c2", ["m1"], "again", 0)]],
    ["append", "long", long_history(150)],
    ["append", "long", [C("c", [f"a{i}" for i in range(40)], "gist", 2)]],
    ["fork", "long", 200, "fork1"],
    ["append", "fork1", [A("fa", "ft", "fr"), O("fo", "ft"), C("fc", ["fa"], "forked", 1)]],
    ["fork", "fork1", 100, "fork2"],  # inside fork1's shared prefix: long's rows
    ["fork_latest", "fork1", "fork3"],
    ["append", "fork3", [U("u3")]],
    ["redact", "long", "o5", None],
    ["redact", "long", "o120", ["/observation/content/0/text"]],
    ["append", "fork2", [A("g1", "gt", "gr"), O("g2", "gt")]],
    # Forgets events fork2 inherited from long, and its own.
    ["append", "fork2", [C("gc", ["a60", "o60", "g1", "g2"], "fork2's", 3)]],
    ["fork", "fork2", 103, "fork4"],
    ["fork", "fork4", 50, "fork5"],  # a fork of a fork of a fork, inside both prefixes
    ["fork", "fork2", 102, "fork6"],
    ["append", "fork6", [C("f6c", ["a70", "o70"])]],  # no summary
    ["fork_latest", "fork6", "fork7"],
    ["append", "fork7", [R("req7")]],
    ["append", "fork7", [M("m7")]],
    ["redact", "fork7", "o40", None],  # an event fork7 shares with long
    ["fork_latest", "rich", "richf"],
    *[
        ["append", "long", [A(f"b{i}", f"bt{i}", f"br{i}"), O(f"bo{i}", f"bt{i}")]]
        for i in range(8)
    ],
    ["append", "long", [C("c9", [f"b{i}" for i in range(4)], "late", 1)]],
    ["fork_latest", "long", "longf"],
]
CALLS_ONCE_MIGRATED: list[list[Any]] = [
    ["append", "fork7", [A("h1", "ht", "hr"), O("h2", "ht"), C("hc", ["h1", "a80"], "h", 1)]],
    ["fork_latest", "fork7", "fork8"],
    ["fork", "fork5", 20, "fork9"],
    ["append", "fork9", [U("u9")]],
    ["append", "longf", [C("lc", ["b5", "bo5"], "longf's", 0)]],
    ["redact", "fork8", "h2", None],
]


@pytest.fixture(scope="module")
def code_0016(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package and migrations of revision 0016's code, laid out as installed (the
    migrations as ``viewstore._migrations``)."""
    folder = tmp_path_factory.mktemp("viewstore-0016")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", CODE_0016, "viewstore", "migrations"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:  # a shallow clone, or no git
        reason = archive.stderr.decode(errors="replace").strip().splitlines()[:1]
        pytest.skip(f"revision 0016's code ({CODE_0016}) is not in this clone: {reason}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    shutil.copytree(folder / "migrations", folder / "viewstore" / "_migrations")
    return folder


def build(url: str, calls: list[list[Any]], code: Path | None = None) -> str:
    """Make ``calls`` on ``url`` with ``code`` (None: this code) in a process of its own;
    returns the revision the store is at."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_build_calls.py")), url],
        input=json.dumps(calls),
        env=env,
        cwd=code or REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def every_read(store: EventStore) -> dict[Any, Any]:
    found: dict[Any, Any] = {}
    for key in store.conversation_ids():
        view = store.view(key)
        logged = [event.event_id for event in store.events(key)]
        asked = logged + [f"{event_id}-summary" for event_id in logged]
        for as_of in (None, *range(view.version + 1)):
            read = store.view(key, as_of=as_of)
            found[key, as_of] = (
                read.event_ids,
                read.payloads,
                read.manipulation_indices,
                read.unhandled_condensation_request,
            )
            if as_of is None or as_of % 10 == 0:
                found[key, as_of, "in view"] = sorted(store.in_view(key, asked, as_of=as_of))
        found[key, "log"] = [(e.seq, e.event_id, e.payload_json, e.hash) for e in store.events(key)]
        for skip in (False, True):
            resumed = store.resume_view(key, skip_state_updates=skip)
            found[key, "resume", skip] = (resumed.event_ids, resumed.manipulation_indices)
        found[key, "forks"] = (store.fork_origin(key), store.forks(key))
    return found


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_a_store_built_at_0016_reads_as_a_fresh_one(
    request: pytest.FixtureRequest, layout: str, code_0016: Path
) -> None:
    url, _, fresh_url = migrated_and_fresh(request, layout)
    assert build(url, CALLS_AT_0016, code_0016) == "0016"
    build(fresh_url, CALLS_AT_0016)
    with EventStore(url) as migrated, EventStore(fresh_url) as fresh:
        migrated.create_schema()
        assert stamped(migrated) == HEAD
        for store in (migrated, fresh):
            store.engine.dispose()  # the calls come from another process
        build(url, CALLS_ONCE_MIGRATED)
        build(fresh_url, CALLS_ONCE_MIGRATED)
        found, wanted = every_read(migrated), every_read(fresh)
        assert all(None not in found[key, None][0] for key in fresh.conversation_ids())
        assert found == wanted
        assert analysts(migrated) == analysts(fresh)
        report = migrated.verify()
        assert report.ok, [c.problems for c in report.conversations if not c.ok]


@pytest.mark.parametrize("layout", ["sqlite", "postgres"])
def test_a_store_built_at_0016_migrated_while_workers_append_and_fork(
    request: pytest.FixtureRequest, layout: str, code_0016: Path, tmp_path: Path
) -> None:
    """The same store, migrated from 0016 as ``killed_and_racing`` does it: killed during
    revision 0022's batches with agent workers appending, condensing and forking, and run
    again while they go on. No call of theirs fails; the store verifies and reads as a replay
    of its log."""
    url, _ = layout_url(request, layout)
    # Enough rows that the batches, one row each, outlast the second the workers get first.
    assert build(url, [*CALLS_AT_0016, ["append", "big", long_history(1000)]], code_0016) == "0016"
    with EventStore(url) as store:
        race = killed_and_racing(store, url, tmp_path, CLEARED)
        assert (race.migrated, race.failures) == (0, {}), race.migration_errors[-800:]
        assert min(race.calls) > 0 and race.forks
        assert stamped(store) == HEAD
        report = store.verify()
        assert report.ok, [c.problems for c in report.conversations if not c.ok]
        assert_reads_replay(store)
