"""The retention sweeper's loop (viewstore/sweeper.py) in a thread of the test process, on a
real store: it stops at once between runs, outlives a failing run (logged) to make the next,
reads the policy file again each run, and takes its settings from the environment as the
store-backed agent server does (docs/retention.md, "Hosting the sweeper")."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from viewstore import EventStore
from viewstore.domain.errors import InvalidArgumentError
from viewstore.store import RetentionReport
from viewstore.sweeper import RetentionSweeper, from_environment, parse_every

from ..ops._helpers import age, message

ERASE_OLD = '[default]\ndelete_idle_after = "90d"\n'
TICK = timedelta(milliseconds=50)


def _store(url: str) -> EventStore:
    store = EventStore(url)
    store.create_schema()
    for name in ("old", "recent"):
        store.append(name, [message(f"{name}-1")])
    age(store, ["old"], days=100)
    return store


def _replace(path: Path, text: str) -> None:
    """A new policy file in one step: the sweeper may read it at any moment."""
    fresh = path.with_suffix(".new")
    fresh.write_text(text)
    fresh.replace(path)


def _wait_for(check: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_run_applies_the_policy_and_logs_one_line(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="viewstore.retention")
    policy = tmp_path / "retention.toml"
    policy.write_text(ERASE_OLD)
    with _store(db_url) as store:
        report = RetentionSweeper(store, policy).sweep()
        assert report.erased == ("old",)
        assert store.conversation_ids() == ["recent"]
    lines = [r.getMessage() for r in caplog.records if r.name == "viewstore.retention"]
    assert lines == [
        "retention: erased 1 conversation(s); compacted 0 event(s) of 0 conversation(s), 0 bytes; "
        "redacted 0 event(s) of 0 conversation(s)"
    ]


def test_stop_ends_the_thread_at_once_between_runs(sqlite_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "retention.toml"
    policy.write_text(ERASE_OLD)
    reports: list[RetentionReport] = []
    with _store(sqlite_url) as store:
        sweeper = RetentionSweeper(
            store, policy, every=timedelta(hours=1), on_report=reports.append
        )
        sweeper.start()
        _wait_for(lambda: reports, "the first run")
        began = time.monotonic()
        assert sweeper.stop() is True
        assert time.monotonic() - began < 1  # not the hour's sleep
        assert [t.name for t in threading.enumerate() if t.name == "viewstore-retention"] == []
        assert [r.erased for r in reports] == [("old",)]


def test_a_failing_run_is_logged_and_the_next_one_runs(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A mistake in the policy file, then an unexpected failure of the store: each is logged
    and the thread lives on; the run after the file is mended applies it."""
    caplog.set_level(logging.INFO, logger="viewstore.retention")
    policy = tmp_path / "retention.toml"
    policy.write_text('[default]\ndelete_idle_after = "90 days"\n')
    reports: list[RetentionReport] = []
    with _store(sqlite_url) as store:
        sweeper = RetentionSweeper(store, policy, every=TICK, on_report=reports.append)
        sweeper.start()
        try:
            _wait_for(lambda: _failures(caplog) >= 2, "two failed runs")
            first = next(r for r in caplog.records if r.name == "viewstore.retention")
            assert "default.delete_idle_after must be" in first.getMessage()
            applied = store.apply_retention
            calls: list[int] = []

            def broken(*args: object, **kwargs: object) -> RetentionReport:
                calls.append(1)
                if len(calls) == 1:
                    raise RuntimeError("the disk went away")
                return applied(*args, **kwargs)  # type: ignore[arg-type]

            store.apply_retention = broken  # type: ignore[method-assign]
            _replace(policy, ERASE_OLD)
            _wait_for(lambda: reports, "a run after the failures")
        finally:
            assert sweeper.stop() is True
        assert reports[0].erased == ("old",) and store.conversation_ids() == ["recent"]
    ours = [r for r in caplog.records if r.name == "viewstore.retention"]
    unexpected = [r for r in ours if r.exc_info is not None]
    assert [str(r.exc_info[1]) for r in unexpected] == ["the disk went away"]  # type: ignore[index]
    assert all(r.getMessage().startswith("retention run failed") for r in unexpected)


def _failures(caplog: pytest.LogCaptureFixture) -> int:
    return sum("retention run failed" in r.getMessage() for r in caplog.records)


def test_the_policy_file_is_read_again_each_run(sqlite_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "retention.toml"
    policy.write_text('[default]\ndelete_idle_after = "never"\n')
    with _store(sqlite_url) as store:
        sweeper = RetentionSweeper(store, policy)
        assert sweeper.sweep().erased == ()
        policy.write_text(ERASE_OLD)
        assert sweeper.sweep().erased == ("old",)


def test_the_settings_come_from_the_environment(sqlite_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "retention.toml"
    policy.write_text(ERASE_OLD)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    _store(sqlite_url).close()
    assert from_environment(sqlite_url, {}) is None
    sweeper = from_environment(
        other,
        {"VIEWSTORE_RETENTION_POLICY": str(policy), "VIEWSTORE_RETENTION_URL": sqlite_url},
    )
    assert sweeper is not None and sweeper.every == timedelta(hours=1)
    assert sweeper.sweep().erased == ("old",)  # on the URL named, not the host's
    assert sweeper.stop() is True
    every = {"VIEWSTORE_RETENTION_POLICY": str(policy), "VIEWSTORE_RETENTION_EVERY": "90s"}
    sweeper = from_environment(sqlite_url, every)
    assert sweeper is not None and sweeper.every == timedelta(seconds=90)
    sweeper.stop()


EVERY = "VIEWSTORE_RETENTION_EVERY must be a positive number"


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"VIEWSTORE_RETENTION_EVERY": "soon"}, EVERY),
        ({"VIEWSTORE_RETENTION_EVERY": "0m"}, EVERY),
        ({"VIEWSTORE_RETENTION_POLICY": "missing.toml"}, "VIEWSTORE_RETENTION_POLICY: cannot read"),
        ({"VIEWSTORE_RETENTION_POLICY": "bad.toml"}, "VIEWSTORE_RETENTION_POLICY: default.compact"),
    ],
)
def test_bad_settings_in_the_environment_are_refused_by_name(
    tmp_path: Path, environ: dict[str, str], says: str
) -> None:
    """Before any store is opened (the agent server exits with the message at its start)."""
    (tmp_path / "good.toml").write_text(ERASE_OLD)
    (tmp_path / "bad.toml").write_text('[default]\ncompact_after = "30y"\n')
    given = {"VIEWSTORE_RETENTION_POLICY": "good.toml", **environ}
    given["VIEWSTORE_RETENTION_POLICY"] = str(tmp_path / given["VIEWSTORE_RETENTION_POLICY"])
    with pytest.raises(InvalidArgumentError) as raised:
        from_environment(f"sqlite:///{tmp_path / 'never-opened.db'}", given)
    assert str(raised.value).startswith(says), raised.value
    assert not (tmp_path / "never-opened.db").exists()


def test_a_period_is_a_positive_number_and_a_unit() -> None:
    assert parse_every("1s", "x") == timedelta(seconds=1)
    assert parse_every(" 2 h ", "x") == timedelta(hours=2)
    for text in ("0s", "1", "h", "1y", "-1h", "1.5h", "9999999d"):
        with pytest.raises(InvalidArgumentError, match=r"^--every must be"):
            parse_every(text, "--every")
    with pytest.raises(InvalidArgumentError, match="positive timedelta"):
        RetentionSweeper(None, "p.toml", every=timedelta(0))  # type: ignore[arg-type]
