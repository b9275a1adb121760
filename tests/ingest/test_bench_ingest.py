"""The ingest benchmark (benchmarks/bench_ingest.py) runs end to end at its ``--quick`` sizes,
through the suite's own entry (``python -m benchmarks``): real agent servers, real ingest
processes, PostgreSQL. It checks the run, not the speed: every post answered 200, every event
stored once, in order, as its server has it. No timing is asserted (the machine is shared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openhands.agent_server", reason="openhands.agent_server is not importable")

from benchmarks import __main__ as bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_the_quick_ingest_benchmark(pg_server_url: str, tmp_path: Path) -> None:
    bench._ingest(pg_server_url, tmp_path, quick=True)
    results = json.loads((tmp_path / "ingest.json").read_text())
    assert results["servers"] == 2 and results["conversations"] == 2
    assert results["events"] > results["posts"] > 0
    assert results["stored_equals_server"] is True
    direct = results["direct"]
    assert direct["appends"] == results["posts"]
    assert direct["appended"] == direct["events"] == results["events"]
    assert direct["stored_equals_server"] is True
    reads = results["rest_reads"]  # each post's page: its events and the stored tail before
    assert reads["pages"] == results["posts"]
    assert reads["events"] == results["events"] + results["posts"] - results["conversations"]
    pulls = results["in_process"]
    assert pulls["posts"] == results["posts"]
    assert pulls["appended"] == pulls["events"] == results["events"]
    assert pulls["stored_equals_server"] is True
    assert set(results["ingest"]) == {"1", "2"}
    for figures in results["ingest"].values():
        assert figures["posts"] == figures["ok"] == results["posts"]
        assert figures["statuses"] == [200]
        assert figures["appended"] == figures["events"] == results["events"]
        # Posted in order: each post brought its own events, none pulled ahead, none again.
        assert figures["pulled"] == 0 and figures["duplicates"] == 0
        assert figures["stored_equals_server"] is True
        assert figures["events_per_s"] > 0
        assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"] <= figures["max_ms"]
        assert results["ingest_over_direct"][str(figures["processes"])] > 0
