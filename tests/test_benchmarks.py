"""The benchmark suite runs end to end (tiny sizes: this checks the suite, not the figures).

Speed is shown by running ``python -m benchmarks`` (docs/benchmarks.md), never by timed
assertions here: this machine is shared and timings flake.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import __main__ as bench
from benchmarks import bench_scale
from viewstore import EventStore
from viewstore.store.distribution.partitions import partition_count


def test_suite_runs_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench._run(None, True, tmp_path) == 0
    out = capsys.readouterr().out
    assert "append+projection vs raw INSERT+COMMIT" in out
    store = json.loads((tmp_path / "store-sqlite.json").read_text())
    for measure in ("single_append", "history", "batches", "condensation", "reads", "memory"):
        assert measure in store
    assert json.loads((tmp_path / "view.json").read_text())["append"]["ratio"] > 0
    web = json.loads((tmp_path / "web-sqlite.json").read_text())
    assert web["condensed"]["pages"]["conversation_now"]["ms"] > 0
    load = json.loads((tmp_path / "web-load-sqlite.json").read_text())
    for figures in load["processes"].values():
        assert figures["long"]["requests"] > 0 and figures["long"]["errors"] == 0
    fork = json.loads((tmp_path / "fork-sqlite.json").read_text())
    assert fork["condensed"]["last"]["rows_written"]["events"] == 0
    assert fork["append_ms"]["fork"] > 0
    footprint = json.loads((tmp_path / "footprint-sqlite.json").read_text())
    for shape in ("history", "condensed"):
        assert footprint[shape]["plain_bytes"] > 0
        assert footprint[shape]["tables"]["events"] > 0
    assert footprint["condensed"]["view_length"] < footprint["history"]["view_length"]
    _check_compaction(json.loads((tmp_path / "compaction-sqlite.json").read_text()))
    _check_masking(json.loads((tmp_path / "masking-sqlite.json").read_text()))
    _check_search(json.loads((tmp_path / "search-sqlite.json").read_text()))
    design = json.loads((tmp_path / "footprint-design-sqlite.json").read_text())
    for shape in ("history", "condensed"):
        assert design[shape]["rows"]["d_events"] == design[shape]["events"]
        assert 0 < design[shape]["design_bytes_per_event"] < design[shape]["now_bytes_per_event"]
    floor = json.loads((tmp_path / "append-floor-sqlite.json").read_text())
    pages = floor["pages_per_append"]
    # Every append writes the conversation row and the log's page at least; the raw insert less.
    assert pages["raw"]["total"] < pages["redesign"]["total"] < pages["viewstore"]["total"]
    assert pages["redesign_unordered"]["total"] < pages["redesign"]["total"]
    assert pages["viewstore"]["conversations"] == 1.0
    assert "r_conversations_version" not in pages["redesign_unordered"]
    assert all(ms > 0 for ms in floor["ms_per_append"].values())
    scale = json.loads((tmp_path / "scale-sqlite.json").read_text())
    assert [stage["conversations"] for stage in scale["stages"]] == [30, 90]
    assert set(scale["ratio_last_first"]) >= {"verify_one", "keyset_page_deep", "view"}
    asynchronous = json.loads((tmp_path / "async-sqlite.json").read_text())
    assert asynchronous["events_per_s"]["async"] > 0 and asynchronous["ratio"] > 0
    follow = json.loads((tmp_path / "follow-sqlite.json").read_text())
    assert follow["follow"]["delivered"] == follow["follow"]["events"] == 5
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert cli["ratio_to_bare_interpreter"]["python -c pass"] == 1.0
    assert cli["median_ms"]["viewstore --help"] > 0
    reads = json.loads((tmp_path / "cli-reads.json").read_text())
    assert reads["ratio_to_bare_interpreter"]["python -c pass"] == 1.0
    for command in ("list", "view", "events", "indices", "feed", "stats", "verify"):
        assert reads["median_ms"][f"viewstore {command}"] > 0, command
    if "no OpenHands SDK measures" not in out:  # where the SDK is installed (CI)
        openhands = json.loads((tmp_path / "openhands-sqlite.json").read_text())
        assert openhands["step"]["ratio"] > 0
        for shape in ("messages", "tools"):
            assert openhands["resume"][shape]["speedup"] > 0


def _check_compaction(found: dict[str, Any]) -> None:
    """The history shape has nothing forgotten; the large condensed one frees bytes; the
    writer ran beside the sweeper."""
    assert found["history"]["events_compacted"] == 0
    assert found["history"]["compacted_bytes"] == found["history"]["store_bytes"]
    large = found["condensed-large"]
    assert large["events_compacted"] > 0 and large["compacted_bytes"] < large["store_bytes"]
    assert found["interference"]["events_compacted"] > 0
    assert found["interference"]["writes_beside"] > 0


def _check_masking(found: dict[str, Any]) -> None:
    """Every arm ran; each event that carried a key left exactly one record, a clean run
    none."""
    arms = found["arms"]
    assert list(arms) == ["none", "common-clean", "common-1pct", "common-10pct"]
    for name, arm in arms.items():
        assert arm["ratio_to_none"] > 0 and arm["events_per_s"] > 0, name
    for name in ("none", "common-clean"):
        assert arms[name]["events_with_key"] == arms[name]["masks_rows"] == 0, name
    for name in ("common-1pct", "common-10pct"):
        assert arms[name]["events_with_key"] > 0, name
        assert arms[name]["masks_rows"] == arms[name]["events_with_key"], name
    assert arms["common-1pct"]["events_with_key"] < arms["common-10pct"]["events_with_key"]
    assert found["mask"]["clean_us"] > 0 and found["mask"]["masked_us"] > 0


def _check_search(found: dict[str, Any]) -> None:
    """Every query, scope and window was searched, and each first page held what the generated
    data has: min(limit, the events holding both words there); both append arms ran."""
    cells = found["search"]
    assert set(cells) == {
        f"{query}/{scope}/{window}"
        for query in ("rare", "common")
        for scope in ("store", "conversation")
        for window in ("none", "live", "forgotten")
    }
    limit = found["limit"]
    for name, cell in cells.items():
        assert cell["runs"] > 0 and cell["p50_ms"] > 0 and cell["p95_ms"] > 0, name
        assert cell["hits"] == min(limit, cell["matches"]), name
        assert cell["more"] == (cell["matches"] > limit) and cell["as_expected"], name
    for query in ("rare", "common"):
        for scope in ("store", "conversation"):
            every = cells[f"{query}/{scope}/none"]["matches"]
            live = cells[f"{query}/{scope}/live"]["matches"]
            forgotten = cells[f"{query}/{scope}/forgotten"]["matches"]
            assert live > 0 and forgotten > 0 and live + forgotten <= every, (query, scope)
    matches = found["matches_store_wide"]
    assert 0 < matches["rare"] < matches["common"] <= found["events"]
    assert cells["common/store/none"]["hits"] == limit  # a full page, more after it
    assert cells["rare/store/live"]["hits"] < limit  # a short one
    appends = found["appends"]
    for arm in ("index", "noindex"):
        assert appends[arm]["appends"] > 0 and appends[arm]["median_ms"] > 0, arm
    assert appends["ratio_median"] > 0 and appends["ratio_mean"] > 0
    assert found["build"]["events_per_s"] > 0


@pytest.mark.postgres
def test_suite_runs_on_postgres(pg_server_url: str, tmp_path: Path) -> None:
    # The PostgreSQL part of the suite: what comes before it (the command line, the pure
    # engine, SQLite) is the run test_suite_runs_on_sqlite makes.
    bench._postgres(pg_server_url, True, tmp_path)
    store = json.loads((tmp_path / "store-postgresql.json").read_text())
    assert store["backend"] == "postgresql"
    assert set(store["writers"]) >= {"1", "2", "4"}
    footprint = json.loads((tmp_path / "footprint-postgresql.json").read_text())
    assert footprint["history"]["tables"]["events"] > 0
    _check_compaction(json.loads((tmp_path / "compaction-postgresql.json").read_text()))
    _check_masking(json.loads((tmp_path / "masking-postgresql.json").read_text()))
    _check_search(json.loads((tmp_path / "search-postgresql.json").read_text()))
    design = json.loads((tmp_path / "footprint-design-postgresql.json").read_text())
    assert design["condensed"]["rows"]["d_forgotten_spans"] > 0
    scale = json.loads((tmp_path / "scale-postgresql.json").read_text())
    assert scale["backend"] == "postgresql" and scale["median_ms"]["verify_one"][-1] > 0
    asynchronous = json.loads((tmp_path / "async-postgresql.json").read_text())
    assert asynchronous["backend"] == "postgresql" and asynchronous["ratio"] > 0
    follow = json.loads((tmp_path / "follow-postgresql.json").read_text())
    for measure in ("follow", "polling_baseline"):
        assert follow[measure]["delivered"] == follow[measure]["events"] == 5
    assert follow["append"]["append_ms_trigger_on"] > 0
    for name, partitions in (("statistics.json", None), ("statistics-partitioned.json", 4)):
        unanalyzed = json.loads((tmp_path / name).read_text())
        assert unanalyzed["partitions"] == partitions and unanalyzed["ratio"]["view"] > 0


@pytest.mark.postgres
def test_scale_grows_a_partitioned_store_from_several_processes(fresh_pg_url: str) -> None:
    """bench_scale's growth by two worker processes, each conversation its own fast-path
    append, stores every conversation exactly once; the store is partitioned and vacuumed."""
    result = bench_scale.main(
        [
            *("--url", fresh_pg_url, "--stages", "24,60", "--repeat", "1"),
            *("--workers", "2", "--batch", "1", "--partitions", "3"),
        ]
    )
    assert result["partitions"] == 3 and result["workers"] == 2 and result["vacuum"]
    assert all(stage["vacuum_s"] > 0 for stage in result["stages"])
    for name in ("verify_one_warm", "append_warm", "view_warm"):
        assert len(result["median_ms"][name]) == 2
    for name in ("append", "append_warm"):  # an append writes to PostgreSQL's log
        assert [written > 0 for written in result["wal_bytes_per_call"][name]] == [True, True]
    store = EventStore(fresh_pg_url)
    try:
        with store.engine.connect() as conn:
            assert partition_count(conn) == 3
        assert store.conversation_count() == 60
        keys = [bench_scale._key(i) for i in range(60)]
        assert {info.id for info in store.conversations(limit=100)} == set(keys)
        assert all(store.version(key) >= bench_scale.EVENTS for key in keys)
        report = store.verify()
        assert report.ok, report.problems
        assert len(report.conversations) == 60
    finally:
        store.close()
