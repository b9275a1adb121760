"""The store-backed agent server's retention settings (``VIEWSTORE_RETENTION_*``, read by
``viewstore.openhands.on_store`` when the server imports it): a bad one stops the server at
its start with a message naming it. Checked in this process, without the agent server: the
settings are read before anything of the server is touched (the sweeper itself:
tests/store/test_sweeper.py; the server on the store: tests/agent_servers/)."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from viewstore import EventStore

MODULE = "viewstore.openhands.on_store"


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"VIEWSTORE_RETENTION_POLICY": "missing.toml"}, "VIEWSTORE_RETENTION_POLICY: cannot read"),
        ({"VIEWSTORE_RETENTION_POLICY": "bad.toml"}, "VIEWSTORE_RETENTION_POLICY: the policy"),
        (
            {"VIEWSTORE_RETENTION_POLICY": "good.toml", "VIEWSTORE_RETENTION_EVERY": "hourly"},
            "VIEWSTORE_RETENTION_EVERY must be a positive number and a unit",
        ),
    ],
)
def test_a_bad_retention_setting_stops_the_server_at_its_start(
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    environ: dict[str, str],
    says: str,
) -> None:
    with EventStore(sqlite_url) as store:
        store.create_schema()
    (tmp_path / "good.toml").write_text('[default]\ndelete_idle_after = "90d"\n')
    (tmp_path / "bad.toml").write_text("[default\n")
    for name in [name for name in os.environ if name.startswith("VIEWSTORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("VIEWSTORE_URL", sqlite_url)
    monkeypatch.chdir(tmp_path)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    with pytest.raises(SystemExit) as exited:
        importlib.import_module(MODULE)
    assert str(exited.value.code).startswith(f"{MODULE}: {says}"), exited.value.code
