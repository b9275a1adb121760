"""Run every benchmark, on SQLite and (when a server is given) PostgreSQL, in one command:

    .venv/bin/python -m benchmarks [--postgres-url URL] [--quick]

The PostgreSQL server URL defaults to ``VIEWSTORE_TEST_POSTGRES_URL``; a fresh database is
created on it for the run and dropped afterwards. SQLite runs on a temporary file. Results are
printed and written to ``benchmarks/results/`` (cli.json, cli-reads.json, view.json,
store-sqlite.json, store-postgresql.json, web-sqlite.json, web-postgresql.json,
web-load-sqlite.json, web-load-postgresql.json, prune-sqlite.json,
prune-postgresql.json, scale-sqlite.json, scale-postgresql.json, fork-sqlite.json,
fork-postgresql.json, footprint-sqlite.json, footprint-postgresql.json, compaction-sqlite.json,
compaction-postgresql.json, masking-sqlite.json, masking-postgresql.json, search-sqlite.json,
search-postgresql.json,
footprint-design-sqlite.json, footprint-design-postgresql.json, append-floor-sqlite.json,
server-append.json, statistics.json, statistics-partitioned.json,
async-sqlite.json, async-postgresql.json, partitions.json, follow-sqlite.json,
follow-postgresql.json, openhands-sqlite.json /
openhands-postgresql.json where the OpenHands SDK is installed, and ingest.json and
agent-servers.json where openhands-agent-server is: ``.venv-agent-server``).
``--quick`` shrinks every size, for a smoke test of the suite itself: its figures mean nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from benchmarks import (
    bench_append_floor,
    bench_async,
    bench_cli,
    bench_cli_reads,
    bench_compaction,
    bench_follow,
    bench_footprint,
    bench_footprint_design,
    bench_fork,
    bench_masking,
    bench_partitions,
    bench_prune,
    bench_scale,
    bench_search,
    bench_server_append,
    bench_statistics,
    bench_store,
    bench_view,
    bench_web,
    bench_web_load,
)
from viewstore.store.database.roles import role_names

QUICK_VIEW = ["--events", "600", "--repeat", "3", "--block", "50"]
QUICK_STORE = ["--large", "600", "--blocks", "2", "--block", "5", "--repeat", "2"]
QUICK_WRITERS = ["--writer-appends", "20"]
QUICK_OPENHANDS = ["--events", "600", "--repeat", "1", "--blocks", "2", "--block", "5"]


def _openhands(url: str, results: Path, backend: str, quick: bool) -> None:
    """The OpenHands SDK measures (bench_openhands), where the SDK can be imported."""
    try:
        from benchmarks import bench_openhands  # noqa: PLC0415 - needs viewstore[openhands]
    except ImportError as error:
        print(f"(no OpenHands SDK measures: {error})")
        return
    output = results / f"openhands-{backend}.json"
    bench_openhands.main(
        ["--url", url, "--output", str(output), *(QUICK_OPENHANDS if quick else [])]
    )


#: Two servers, one short conversation each: every path (direct, one and two ingests) once.
QUICK_INGEST = ["--servers", "2", "--conversations", "1", "--rounds", "3"]


def _ingest(server_url: str, results: Path, quick: bool) -> None:
    """The ingest from real agent servers (bench_ingest), where the agent server can be
    imported; it makes its own scratch databases on the server."""
    try:
        from benchmarks import bench_ingest  # noqa: PLC0415 - needs openhands-agent-server
    except ImportError as error:
        print(f"(no ingest measures: openhands-agent-server is not importable: {error})")
        return
    output = results / "ingest.json"
    if bench_ingest.main(
        ["--postgres-url", server_url, "--output", str(output)] + (QUICK_INGEST if quick else [])
    ):
        raise RuntimeError(f"the ingest stored conversations unlike their servers' logs: {output}")


#: Agent servers on the store against on disk: 2-step runs, 20 conversations listed, a 200-event
#: takeover (the module's own --quick sizes).
QUICK_AGENT_SERVERS = ["--quick"]


def _agent_servers(server_url: str | None, results: Path, quick: bool) -> None:
    """Agent servers on the store against on disk (bench_agent_servers), where the agent server
    can be imported: on SQLite, and on PostgreSQL when a server is given (a scratch database
    on it)."""
    try:
        from benchmarks import bench_agent_servers  # noqa: PLC0415 - needs openhands-agent-server
    except ImportError as error:
        print(f"(no agent-server measures: openhands-agent-server is not importable: {error})")
        return
    output = results / "agent-servers.json"
    if bench_agent_servers.main(
        ["--output", str(output)]
        + ["--postgres-url", server_url or ""]  # "": SQLite only, whatever the environment
        + (QUICK_AGENT_SERVERS if quick else [])
    ):
        raise RuntimeError(f"the agent servers' benchmark found problems: {output}")


QUICK_WEB = ["--events", "600", "--repeat", "2"]
QUICK_PRUNE = ["--conversations", "5", "--events", "20"]
QUICK_COMPACTION = ["--events", "400", "--conversations", "2", "--writes", "20"]
#: 20 keys in the 10% arm, 2 in the 1% one: every arm's path runs, in a few seconds.
QUICK_MASKING = ["--events", "200", "--conversations", "2", "--block", "20", "--mask-repeat", "2"]
#: The suite searches a store of 100,000 events; ``python -m benchmarks.bench_search`` alone, 1M.
SEARCH = ["--events", "100000", "--conversations", "10"]
#: Two condensed conversations of 1,000 short events, 100 appends an arm: every cell and arm.
QUICK_SEARCH = [
    *("--events", "2000", "--conversations", "2", "--text-scale", "0.2", "--repeat", "2"),
    *("--appends", "100", "--append-conversations", "2", "--block", "20", "--workers", "1"),
]
#: The suite grows a small store; ``python -m benchmarks.bench_scale`` alone goes to 100,000.
SCALE = ["--stages", "1000,10000", "--repeat", "10"]
QUICK_SCALE = ["--stages", "30,90", "--repeat", "2"]
QUICK_FORK = ["--events", "300", "--repeat", "1", "--blocks", "2"]
QUICK_FOOTPRINT = ["--events", "400", "--repeat", "1"]
QUICK_FOOTPRINT_DESIGN = ["--events", "400"]
QUICK_APPEND_FLOOR = ["--blocks", "2", "--block", "40"]
QUICK_SERVER_APPEND = ["--blocks", "3", "--block", "5"]
QUICK_WEB_LOAD = ["--events", "300", "--clients", "4", "--seconds", "1", "--workers", "2"]
QUICK_ASYNC = ["--conversations", "4", "--appends", "3", "--rounds", "2", "--pool", "4"]
QUICK_FOLLOW = ["--events", "5", "--gap", "0.05", "--blocks", "2", "--block", "5"]
QUICK_STATISTICS = ["--events", "600", "--others", "1", "--repeat", "2"]
QUICK_PARTITIONS = ["--blocks", "2", "--block", "5", "--conversations", "2", "--read-size", "200"]


def _masking(store: AbstractContextManager[str], backend: str, results: Path, quick: bool) -> None:
    """Masking before storing (bench_masking), on the database ``store`` gives for the run."""
    print(f"\n== masking before storing: the append's cost, {backend}", flush=True)
    with store as url:
        bench_masking.main(
            ["--url", url, "--output", str(results / f"masking-{backend.lower()}.json")]
            + (QUICK_MASKING if quick else [])
        )


def _search(store: AbstractContextManager[str], backend: str, results: Path, quick: bool) -> None:
    """Full-text search (bench_search), on the database ``store`` gives for the run."""
    print(f"\n== full-text search: searches, an append's cost, {backend}", flush=True)
    with store as url:
        bench_search.main(
            ["--url", url, "--output", str(results / f"search-{backend.lower()}.json")]
            + (QUICK_SEARCH if quick else SEARCH)
        )


@contextmanager
def scratch_postgres(server_url: str) -> Iterator[str]:
    """A fresh database on the server for the length of the run."""
    name = f"viewstore_bench_{uuid.uuid4().hex[:12]}"
    server = make_url(server_url).set(drivername="postgresql+psycopg")
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            for role in role_names(name).values():  # created by the migrations, server-wide
                conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))
        admin.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="viewstore benchmarks, every backend")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("VIEWSTORE_TEST_POSTGRES_URL"),
        help="a PostgreSQL server to benchmark on (default: $VIEWSTORE_TEST_POSTGRES_URL)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test only")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        return _run(args.postgres_url, args.quick, Path(folder))


def _run(postgres_url: str | None, quick: bool, scratch: Path) -> int:
    # A quick run is a smoke test: it must not overwrite the real results.
    results = scratch if quick else bench_store.RESULTS
    print("== command-line start-up", flush=True)
    bench_cli.main(["--runs", "3" if quick else "20", "--output", str(results / "cli.json")])
    print("\n== read commands, start to exit, on a small SQLite store", flush=True)
    bench_cli_reads.main(
        ["--runs", "2" if quick else "15", "--output", str(results / "cli-reads.json")]
    )
    print("\n== pure view engine", flush=True)
    bench_view.main([*(QUICK_VIEW if quick else []), "--output", str(results / "view.json")])
    _sqlite(quick, scratch, results)
    print("\n== agent servers on the store against on disk, SQLite and PostgreSQL", flush=True)
    _agent_servers(postgres_url, results, quick)
    if not postgres_url:
        print("\n(no PostgreSQL: pass --postgres-url or set VIEWSTORE_TEST_POSTGRES_URL)")
        return 0
    _postgres(postgres_url, quick, results)
    return 0


def _sqlite(quick: bool, scratch: Path, results: Path) -> None:
    store_args = ["--results-dir", str(results), *(QUICK_STORE if quick else [])]
    print("\n== SQLite", flush=True)
    bench_store.main(["--url", f"sqlite:///{scratch / 'bench.db'}", *store_args])
    _openhands(f"sqlite:///{scratch / 'openhands.db'}", results, "sqlite", quick)
    web_args = ["--results-dir", str(results), *(QUICK_WEB if quick else [])]
    prune_args = QUICK_PRUNE if quick else []
    print("\n== prune, SQLite", flush=True)
    prune_db = f"sqlite:///{scratch / 'prune.db'}"
    bench_prune.main(
        ["--url", prune_db, "--output", str(results / "prune-sqlite.json"), *prune_args]
    )
    print("\n== a growing store, SQLite", flush=True)
    bench_scale.main(
        [
            "--url",
            f"sqlite:///{scratch / 'scale.db'}",
            "--output",
            str(results / "scale-sqlite.json"),
        ]
        + (QUICK_SCALE if quick else SCALE)
    )
    print("\n== forks, SQLite", flush=True)
    bench_fork.main(
        ["--url", f"sqlite:///{scratch / 'fork.db'}", "--output", str(results / "fork-sqlite.json")]
        + (QUICK_FORK if quick else [])
    )
    print("\n== bytes per conversation, SQLite", flush=True)
    bench_footprint.main(
        ["--url", f"sqlite:///{scratch / 'footprint.db'}"]
        + ["--output", str(results / "footprint-sqlite.json")]
        + (QUICK_FOOTPRINT if quick else [])
    )
    print("\n== compaction: bytes, rate, a writer beside it, SQLite", flush=True)
    bench_compaction.main(
        ["--url", f"sqlite:///{scratch / 'compaction.db'}"]
        + ["--output", str(results / "compaction-sqlite.json")]
        + (QUICK_COMPACTION if quick else [])
    )
    _masking(nullcontext(f"sqlite:///{scratch / 'masking.db'}"), "SQLite", results, quick)
    _search(nullcontext(f"sqlite:///{scratch / 'search.db'}"), "SQLite", results, quick)
    print("\n== bytes per conversation in a slimmer schema (a sizing study), SQLite", flush=True)
    bench_footprint_design.main(
        ["--url", f"sqlite:///{scratch / 'footprint-design.db'}"]
        + ["--output", str(results / "footprint-design-sqlite.json")]
        + (QUICK_FOOTPRINT_DESIGN if quick else [])
    )
    print("\n== the one-event append, page by page, and in a slimmer schema, SQLite", flush=True)
    bench_append_floor.main(
        ["--url", f"sqlite:///{scratch / 'append-floor.db'}"]
        + ["--output", str(results / "append-floor-sqlite.json")]
        + (QUICK_APPEND_FLOOR if quick else [])
    )
    print("\n== viewer pages, SQLite", flush=True)
    bench_web.main(["--url", f"sqlite:///{scratch / 'web.db'}", *web_args])
    print("\n== the viewer under load, SQLite", flush=True)
    load_db = f"sqlite:///{scratch / 'web-load.db'}"
    load_out = str(results / "web-load-sqlite.json")
    bench_web_load.main(
        ["--url", load_db, "--output", load_out, *(QUICK_WEB_LOAD if quick else [])]
    )
    print("\n== asyncio store against a thread pool, SQLite", flush=True)
    async_db = f"sqlite:///{scratch / 'async.db'}"
    bench_async.main(
        ["--url", async_db, "--output", str(results / "async-sqlite.json")]
        + (QUICK_ASYNC if quick else [])
    )

    print("\n== following the feed, SQLite", flush=True)
    bench_follow.main(
        [
            *("--url", f"sqlite:///{scratch / 'follow.db'}"),
            *("--output", str(results / "follow-sqlite.json")),
            *(QUICK_FOLLOW if quick else []),
        ]
    )


def _postgres(postgres_url: str, quick: bool, results: Path) -> None:
    store_args = ["--results-dir", str(results), *(QUICK_STORE if quick else [])]
    web_args = ["--results-dir", str(results), *(QUICK_WEB if quick else [])]
    prune_args = QUICK_PRUNE if quick else []
    print("\n== PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_store.main(["--url", url, *store_args, *(QUICK_WRITERS if quick else [])])
        _openhands(url, results, "postgresql", quick)
    print("\n== viewer pages, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_web.main(["--url", url, *web_args])
    print("\n== the viewer under load, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_web_load.main(
            ["--url", url, "--output", str(results / "web-load-postgresql.json")]
            + (QUICK_WEB_LOAD if quick else [])
        )
    print("\n== prune, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_prune.main(
            ["--url", url, "--output", str(results / "prune-postgresql.json"), *prune_args]
        )
    print("\n== a growing store, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_scale.main(
            ["--url", url, "--output", str(results / "scale-postgresql.json")]
            + (QUICK_SCALE if quick else SCALE)
        )
    print("\n== forks, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_fork.main(
            ["--url", url, "--output", str(results / "fork-postgresql.json")]
            + (QUICK_FORK if quick else [])
        )
    print("\n== bytes per conversation, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_footprint.main(
            ["--url", url, "--output", str(results / "footprint-postgresql.json")]
            + (QUICK_FOOTPRINT if quick else [])
        )
    print("\n== compaction: bytes, rate, a writer beside it, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_compaction.main(
            ["--url", url, "--output", str(results / "compaction-postgresql.json")]
            + (QUICK_COMPACTION if quick else [])
        )
    _masking(scratch_postgres(postgres_url), "PostgreSQL", results, quick)
    _search(scratch_postgres(postgres_url), "PostgreSQL", results, quick)
    print("\n== bytes per conversation in a slimmer schema, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_footprint_design.main(
            ["--url", url, "--output", str(results / "footprint-design-postgresql.json")]
            + (QUICK_FOOTPRINT_DESIGN if quick else [])
        )
    print("\n== server-side append, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_server_append.main(
            ["--url", url, "--output", str(results / "server-append.json")]
            + (QUICK_SERVER_APPEND if quick else [])
        )
    print("\n== asyncio store against a thread pool, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_async.main(
            ["--url", url, "--output", str(results / "async-postgresql.json")]
            + (QUICK_ASYNC if quick else [])
        )
    print("\n== partitioned tables, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as plain, scratch_postgres(postgres_url) as split:
        bench_partitions.main(
            [
                *("--plain-url", plain, "--partitioned-url", split),
                *("--output", str(results / "partitions.json")),
                *(QUICK_PARTITIONS if quick else []),
            ]
        )
    print("\n== reads without statistics, PostgreSQL, plain and partitioned", flush=True)
    for partitions, name in ((None, "statistics.json"), (4, "statistics-partitioned.json")):
        with scratch_postgres(postgres_url) as url:
            bench_statistics.main(
                [
                    *("--url", url, "--output", str(results / name)),
                    *(("--partitions", str(partitions)) if partitions else ()),
                    *(QUICK_STATISTICS if quick else []),
                ]
            )
    print("\n== ingest from agent servers, PostgreSQL", flush=True)
    _ingest(postgres_url, results, quick)
    print("\n== following the feed, PostgreSQL", flush=True)
    with scratch_postgres(postgres_url) as url:
        bench_follow.main(
            ["--url", url, "--output", str(results / "follow-postgresql.json")]
            + (QUICK_FOLLOW if quick else [])
        )


if __name__ == "__main__":
    sys.exit(main())
