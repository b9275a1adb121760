"""The agent servers' benchmark (benchmarks/bench_agent_servers.py) runs end to end at its
``--quick`` sizes, through the suite's own entry (``python -m benchmarks``): real disk-backed
and store-backed ``openhands-agent-server`` processes, SQLite and PostgreSQL. It checks the run,
not the speed: every figure is there and positive, each server listed and counted the
conversations seeded for it, and each takeover's server really resumed the conversation (its
first LLM request carried the stored log's last tool call) and took it over from the killed
holder. No timing is asserted (the machine is shared)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openhands.agent_server", reason="openhands.agent_server is not importable")

from benchmarks import __main__ as bench

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BACKENDS = ("sqlite", "postgresql")


def _positive(figures: dict[str, Any], *keys: str) -> None:
    for key in keys:
        assert isinstance(figures[key], int | float) and figures[key] > 0, (key, figures)


def test_the_quick_agent_servers_benchmark(pg_server_url: str, tmp_path: Path) -> None:
    bench._agent_servers(pg_server_url, tmp_path, quick=True)
    results = json.loads((tmp_path / "agent-servers.json").read_text())
    assert results["problems"] == []
    sizes, events = results["listing_sizes"], results["takeover_events"]
    assert sizes and events

    # 1. Per step: both shapes on both backends, every run of the scripted length.
    assert set(results["steps"]) == set(BACKENDS)
    for shapes in results["steps"].values():
        assert set(shapes) == {"plain", "condensed"}
        assert set(shapes["plain"]["steps"]) == {results["rounds"] + 1}
        assert min(shapes["condensed"]["steps"]) >= results["rounds"] + 1  # a summary may add
        for figures in shapes.values():
            assert len(figures["steps"]) == 2 * figures["runs"]
            assert len(figures["disk_samples"]) == len(figures["store_samples"]) == figures["runs"]
            _positive(figures, "disk_s_per_step", "store_s_per_step", "ratio")
            _positive(figures, "disk_s_between_requests", "store_s_between_requests")
            _positive(figures, "between_requests_ratio")

    # 2. Start and first listing: each server counted what was seeded and listed a page of it.
    listing = results["listing"]
    assert listing["disk_note"] is None
    for side in ("disk", *BACKENDS):
        assert list(listing[side]) == [str(size) for size in sizes]
        for size, figures in listing[side].items():
            assert figures["count"] == figures["conversations"] == int(size)
            assert figures["listed"] == min(100, int(size))
            _positive(figures, "start_s", "search_s", "count_s", "serve_s", "total_s", "rss_mb")
            _positive(figures, "search_again_s")
    for backend in BACKENDS:
        ratios = listing["ratios"][backend]
        for size in sizes:
            _positive(ratios[str(size)], "start_s", "serve_s", "total_s", "rss_mb")
        _positive(ratios["store_largest_over_smallest"], "start_s", "serve_s", "total_s")

    # 3. Takeover: a real one on each backend, a real restore on disk, the same view sent.
    takeover = results["takeover"]
    for size in events:
        disk = takeover["disk"][str(size)]
        assert disk["llm_request"] is True and disk["request_carries_last_call"] is True
        assert disk["events"] >= size * 0.9
        _positive(disk, "copy_s", "start_s", "resume_s", "post_s", "restore_s")
        for backend in BACKENDS:
            figures = takeover[backend][str(size)]
            assert figures["taken_over"] is True  # one generation on, run by the worker
            assert figures["llm_request"] is True
            assert figures["request_carries_last_call"] is True
            assert figures["request_carries_message"] is True
            assert figures["events"] >= size * 0.9
            _positive(figures, "seconds", "post_s", "request_messages")
            ratio = takeover["ratios"][backend][str(size)]
            _positive(ratio, "over_disk_resume", "over_disk_restore")
            assert ratio["same_shape_as_disk"] is True
        assert takeover["ratios"]["sqlite"][str(size)]["same_calls_and_results_as_disk"] is True
