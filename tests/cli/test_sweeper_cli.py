"""The retention sweeper hosted by the long-running commands (docs/retention.md, "Hosting the
sweeper"): real ``viewstore serve`` and ``viewstore ingest`` processes with a period of a
second, on SQLite and PostgreSQL, erasing and compacting while they go on answering; a bad
setting refused in one line before the server starts; two sweepers at once on PostgreSQL."""

from __future__ import annotations

import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from viewstore import EventStore
from viewstore.store.database.roles import role_name

from ..ingest._fleet import TOKEN, free_port
from ..ops._helpers import age, condensation, message
from ..store.test_roles import as_login, login_in
from ._process import SCRIPT, clean_env, error_line, run

POLICY = '[default]\ncompact_after = "0d"\ndelete_idle_after = "90d"\n'
SOURCES = '[sources.sandbox]\nurl = "http://127.0.0.1:9"\n'


@dataclass
class Host:
    """A ``viewstore serve`` or ``ingest`` process: its base URL and its stderr."""

    process: subprocess.Popen[bytes]
    base: str
    log: Path
    health: str  # a page that answers 200

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def answers(self) -> bool:
        with urllib.request.urlopen(self.base + self.health, timeout=5) as response:
            return bool(response.status == 200)


@contextmanager
def hosting(command: str, url: str, folder: Path, *options: str) -> Iterator[Host]:
    """``viewstore --url URL COMMAND OPTIONS`` until the block ends (then SIGTERM: it must
    stop, sweeper and all, within a few seconds)."""
    port = free_port()
    sources = folder / "sources.toml"
    sources.write_text(SOURCES)
    extra = ["--token", TOKEN, "--sources", str(sources)] if command == "ingest" else []
    log = folder / f"{command}-{port}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [SCRIPT, "--url", url, command, "--port", str(port), *extra, *options],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=clean_env(),
        )
    host = Host(process, f"http://127.0.0.1:{port}", log, "/health" if extra else "/")
    try:
        _until(lambda: _up(host), "the server to answer")
        yield host
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"{command} did not stop on SIGTERM: {host.lines()}")


def _replace(path: Path, text_: str) -> None:
    """A new policy file in one step: a sweeper may read it at any moment."""
    fresh = path.with_suffix(".new")
    fresh.write_text(text_)
    fresh.replace(path)


def _up(host: Host) -> bool:
    if host.process.poll() is not None:
        pytest.fail(f"the server exited: {host.lines()}")
    try:
        return host.answers()
    except OSError:
        return False


def _until(check: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _condensed(store: EventStore, name: str) -> None:
    """A conversation whose first events a condensation forgot: what compaction takes."""
    big = "output line\n" * 300
    forgotten = [f"{name}-m{i}" for i in range(3)]
    store.append(name, [message(eid, big) for eid in forgotten])
    store.append(name, [condensation(f"{name}-k", forgotten, summary="ran them")])


def _store(url: str, old: int = 1, compacted: int = 1) -> EventStore:
    store = EventStore(url)
    store.create_schema()
    names = [f"old{i:02d}" for i in range(old)]
    for name in [*names, "recent"]:
        store.append(name, [message(f"{name}-1")])
    for i in range(compacted):
        _condensed(store, f"c{i:02d}")
    age(store, names, days=100)
    return store


def _redactions(store: EventStore) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM redactions")).scalar_one())


def _counts(lines: list[str]) -> tuple[int, int]:
    """Conversations erased and events compacted, summed over a host's log lines."""
    erased = compacted = 0
    for line in lines:
        found = re.match(r"retention: erased (\d+) conversation\(s\); compacted (\d+) ", line)
        if found:
            erased += int(found.group(1))
            compacted += int(found.group(2))
    return erased, compacted


@pytest.mark.parametrize("command", ["serve", "ingest"])
def test_a_server_sweeps_while_it_answers(db_url: str, tmp_path: Path, command: str) -> None:
    policy = tmp_path / "retention.toml"
    policy.write_text(POLICY)
    with _store(db_url) as store:
        options = ("--retention-policy", str(policy), "--retention-every", "1s")
        with hosting(command, db_url, tmp_path, *options) as host:
            _until(lambda: store.conversation_ids() == ["c00", "recent"], "the old one erased")
            _until(lambda: _redactions(store) == 3, "the forgotten events compacted")
            assert host.answers()
            _until(
                lambda: sum(line.startswith("retention: ") for line in host.lines()) >= 3,
                "two more runs",
            )
        assert _counts(host.lines()) == (1, 3)
        assert not any("failed" in line for line in host.lines()), host.lines()
        assert store.tombstone("old00") is not None and store.verify().ok


@pytest.mark.postgres
def test_the_ingest_writes_as_the_writer_and_sweeps_as_the_owner(
    fresh_pg_url: str, tmp_path: Path
) -> None:
    """The writer role may not erase: its own sweeper's runs fail, each logged, the ingest
    going on; with ``--retention-url`` the owner's the sweep is done."""
    policy = tmp_path / "retention.toml"
    policy.write_text(POLICY)
    database = make_url(fresh_pg_url).database
    assert database is not None
    with (
        _store(fresh_pg_url) as store,
        login_in(fresh_pg_url, role_name("writer", database)) as login,
    ):
        writer = as_login(fresh_pg_url, login)
        options = ["--retention-policy", str(policy), "--retention-every", "1s"]
        with hosting("ingest", writer, tmp_path, *options) as host:
            _until(
                lambda: sum("retention run failed" in line for line in host.lines()) >= 2,
                "two failed runs",
            )
            assert host.answers()
        assert "permission denied" in "\n".join(host.lines())
        assert "old00" in store.conversation_ids()
        with hosting("ingest", writer, tmp_path, *options, "--retention-url", fresh_pg_url):
            _until(lambda: "old00" not in store.conversation_ids(), "the old one erased")
            _until(lambda: _redactions(store) == 3, "the forgotten events compacted")
        assert store.verify().ok


@pytest.mark.postgres
def test_two_sweepers_at_once_treat_each_conversation_once(
    fresh_pg_url: str, tmp_path: Path
) -> None:
    """A viewer and an ingest, each with a sweeper every second, on one PostgreSQL store:
    every old conversation erased and every forgotten event compacted once, between them
    (their logs' counts add up to what the store holds), and ``verify`` clean."""
    policy = tmp_path / "retention.toml"
    policy.write_text('[default]\ncompact_after = "never"\n')  # until both are up
    old, compacted = 30, 12
    with _store(fresh_pg_url, old=old, compacted=compacted) as store:
        options = ("--retention-policy", str(policy), "--retention-every", "1s")
        with (
            hosting("serve", fresh_pg_url, tmp_path, *options) as viewer,
            hosting("ingest", fresh_pg_url, tmp_path, *options) as ingest,
        ):
            _replace(policy, POLICY)  # read by each at its next run, within the second
            _until(lambda: len(store.conversation_ids()) == compacted + 1, "the old ones erased")
            _until(lambda: _redactions(store) == 3 * compacted, "every forgotten event compacted")
            _until(lambda: all(len(h.lines()) >= 4 for h in (viewer, ingest)), "more runs")
        hosts = (viewer, ingest)
        for host in hosts:
            assert not any("failed" in line for line in host.lines()), host.lines()
        counts = [_counts(host.lines()) for host in hosts]
        assert (sum(c[0] for c in counts), sum(c[1] for c in counts)) == (old, 3 * compacted)
        assert all(store.tombstone(f"old{i:02d}") is not None for i in range(old))
        with store.engine.connect() as conn:
            twice = conn.execute(
                text(
                    "SELECT count(*) FROM (SELECT conversation_id, event_id FROM redactions "
                    "GROUP BY 1, 2 HAVING count(*) > 1) AS t"
                )
            ).scalar_one()
        assert twice == 0
        assert store.verify().ok


@pytest.mark.parametrize("command", ["serve", "ingest"])
@pytest.mark.parametrize(
    "case",
    [
        ("[default", [], "not TOML"),
        ('[default]\ncompact_after = "30y"', [], "default.compact_after"),
        (None, [], "cannot read the policy"),
        (POLICY, ["--retention-every", "0s"], "--retention-every"),
        (POLICY, ["--retention-every", "hourly"], "--retention-every"),
        (POLICY, ["--retention-url", "sqlite:///missing.db"], "missing.db: no such database"),
    ],
)
def test_a_bad_retention_setting_is_one_line_before_the_server_starts(
    sqlite_url: str, tmp_path: Path, command: str, case: tuple[str | None, list[str], str]
) -> None:
    content, options, says = case
    with EventStore(sqlite_url) as store:
        store.create_schema()
    policy = tmp_path / "retention.toml"
    if content is not None:
        policy.write_text(content)
    (tmp_path / "sources.toml").write_text(SOURCES)
    extra = ["--token", TOKEN, "--sources", "sources.toml"] if command == "ingest" else []
    args = [command, "--port", "0", *extra, "--retention-policy", "retention.toml", *options]
    assert says in error_line(run(*args, url=sqlite_url, cwd=tmp_path))
    assert not (tmp_path / "missing.db").exists()


def test_retention_run_every_outlives_a_bad_edit_of_the_policy(
    sqlite_url: str, tmp_path: Path
) -> None:
    """``retention run --every`` is the same loop: a run after the policy file went bad says
    so on stderr and the next run, once it is mended, applies it."""
    policy = tmp_path / "retention.toml"
    policy.write_text('[default]\ndelete_idle_after = "never"\n')
    _store(sqlite_url, old=1, compacted=0).close()
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    command = [SCRIPT, "--url", sqlite_url, "retention", "run", "--policy", str(policy)]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--every", "1s", "--pace", "0"],
            stdout=stdout,
            stderr=stderr,
            env=clean_env(),
        )
    try:
        _until(lambda: out.read_text().startswith("erased 0 conversation(s)"), "the first run")
        _replace(policy, "[default\n")
        _until(lambda: "retention run failed: the policy" in err.read_text(), "a failed run")
        _replace(policy, POLICY)
        _until(lambda: "erased 1 conversation(s)" in out.read_text(), "the mended policy")
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    # click ends a ^C with an empty line and "Aborted!" (exit 1), as before the sweeper
    said = [line for line in err.read_text().splitlines() if line not in {"", "Aborted!"}]
    assert said and all(line.startswith("retention run failed: the policy") for line in said)
