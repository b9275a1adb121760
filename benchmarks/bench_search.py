"""Full-text search (docs/search.md, issue 43): what a search costs on a large store, and what
keeping the index costs an append.

    python -m benchmarks.bench_search --url URL [--events N] [--conversations K] [--repeat R]
        [--budget S] [--appends A] [--block B] [--workers W] [--text-scale S] [--keep]
        [--output PATH]

**The store.** ``--conversations`` realistic OpenHands streams (``bench_view.generate``,
condensed: most of a long conversation is forgotten, its last ~120 events live), ``--events``
events in all, texts at ``--text-scale`` (1.0, the default: the generator's full texts, about
1.1 KiB a payload). Each conversation is stored by one append of ``--batch`` events at a time
(the whole conversation by default), into a fresh store beside ``--url``'s file on SQLite
(``search-index.db``) or in the schema ``bench_search`` of ``--url``'s database on PostgreSQL,
by ``--workers`` processes at once on PostgreSQL (each generating and appending its share; one
on SQLite, a single writer), then ``VACUUM (ANALYZE)`` on PostgreSQL. The build's time is
reported, generation included.

**Searches.** Two two-word queries from words the generator writes: ``rare`` ("timed out",
the text of a tool's time-out, about 1% of the events) and ``common`` ("regression test", two
of the filler words, in most events that carry text); each store-wide and in one conversation
(the middle one), without a window, ``window="live"`` and ``window="forgotten"``:
``store.search(query, conversation_id=..., window=..., limit=--limit)``. The cells take turns,
each run once a round after one warm-up, until each has ``--repeat`` runs, or has spent
``--budget`` seconds in ``MIN_RUNS`` runs (in fewer when they took twice the budget: a search
of minutes runs once after its warm-up); p50 and p95 in milliseconds (of 1 to 3 runs: the
last run's, the slowest). Each cell's first page is
checked against the generated data: the events whose string values hold both words (split as
the backends split them), in the conversation's live view (``store.view``) or among the ids a
condensation forgot; the page must hold min(limit, that count) hits. A cell slower than
``--explain-over`` milliseconds has its statement's plan recorded (PostgreSQL:
``EXPLAIN (ANALYZE, BUFFERS)``, SQLite: ``EXPLAIN QUERY PLAN``).

**Appends.** The store is then copied whole (SQLite: the file, after a checkpoint;
PostgreSQL: ``CREATE DATABASE ... TEMPLATE``, the database ``<name>_noindex``) and the copy's
index removed (PostgreSQL: ``DROP INDEX ix_events_search``; SQLite: the three
``events_search_*`` triggers and the ``events_search`` table): two stores of the same shape,
one keeping the index. ``--appends`` one-event appends go to ``--append-conversations`` fresh
conversations of each (their first two events appended before the clock starts, so every timed
append may take the fast path), round-robin; the arms take turns in blocks of ``--block``
appends, the order alternating, each block ending on SQLite with a checkpoint of the WAL
(``bench_store.checkpoint``). Median, 95th percentile and mean of one append, events per
second, and the ratio with/without of the median and of the mean (goal: <= 1.15).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import re
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from benchmarks.bench_store import checkpoint, median, save
from benchmarks.bench_view import generate
from viewstore import EventStore
from viewstore.store.database import schema as tables

#: Two-word queries, from words the generator writes, with very different frequencies.
QUERIES = {"rare": "timed out", "common": "regression test"}
WINDOWS: dict[str, str | None] = {"none": None, "live": "live", "forgotten": "forgotten"}
SCOPES = ("store", "conversation")
MIN_RUNS = 3
SCHEMA = "bench_search"  # PostgreSQL: the store's schema
TARGET = 1.15  # an append with the index against without it
#: Appended before the clock starts: the first append of a conversation creates it.
WARM = 2
#: A word as both backends split text: a run of letters and digits (the underscore splits).
_TOKEN = re.compile(r"[^\W_]+")


def _key(c: int) -> str:
    return f"search-{c:04d}"


def _strings(value: Any) -> Iterator[str]:
    """Every string value of a payload, never a key: what the index holds."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def _words(event: dict[str, Any]) -> set[str]:
    return {word for s in _strings(event) for word in _TOKEN.findall(s.lower())}


def expected(events: list[dict[str, Any]], live: set[str]) -> dict[str, dict[str, int]]:
    """Per query and window, the events of one conversation that hold every word of the query:
    all of them, those in ``live`` (its live view) and those a condensation forgot."""
    forgotten = {
        event_id
        for event in events
        if event["kind"] == "Condensation"
        for event_id in event["forgotten_event_ids"]
    }
    wanted = {name: set(query.split()) for name, query in QUERIES.items()}
    found: dict[str, list[str]] = {name: [] for name in QUERIES}
    for event in events:
        words = _words(event)
        for name, needed in wanted.items():
            if needed <= words:
                found[name].append(event["id"])
    return {
        name: {
            "none": len(ids),
            "live": sum(i in live for i in ids),
            "forgotten": sum(i in forgotten and i not in live for i in ids),
        }
        for name, ids in found.items()
    }


# -- the store ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Growth:
    """How the store is grown: where, each conversation's events, appends of ``batch``."""

    url: str
    schema: str | None
    per: int
    seed: int
    text_scale: float
    batch: int


def _grow_share(growth: Growth, conversations: list[int]) -> dict[str, Any]:
    """Generate and store ``conversations``; what they should match, and the time taken."""
    store = EventStore(growth.url, schema=growth.schema)
    counts: dict[str, dict[str, dict[str, int]]] = {}
    generate_s = append_s = check_s = 0.0
    payload_bytes = 0
    try:
        for c in conversations:
            began = time.perf_counter()
            events = generate(
                growth.per, growth.seed + c, condense=True, text_scale=growth.text_scale
            )[: growth.per]
            generate_s += time.perf_counter() - began
            began = time.perf_counter()
            for start in range(0, len(events), growth.batch):
                store.append(_key(c), events[start : start + growth.batch], expected_version=start)
            append_s += time.perf_counter() - began
            began = time.perf_counter()
            live = set(store.view(_key(c)).event_ids)
            counts[_key(c)] = expected(events, live)
            payload_bytes += sum(len(json.dumps(e, separators=(",", ":"))) for e in events)
            check_s += time.perf_counter() - began
    finally:
        store.close()
    return {
        "counts": counts,
        "generate_s": generate_s,
        "append_s": append_s,
        "check_s": check_s,
        "payload_bytes": payload_bytes,
    }


def build(growth: Growth, conversations: int, workers: int) -> dict[str, Any]:
    """Store ``conversations`` conversations by ``workers`` processes (in this one for 1)."""
    began = time.perf_counter()
    shares = [list(range(w, conversations, workers)) for w in range(workers)]
    if workers == 1:
        parts = [_grow_share(growth, shares[0])]
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            futures = [pool.submit(_grow_share, growth, share) for share in shares]
            parts = [future.result() for future in futures]
    seconds = time.perf_counter() - began
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for part in parts:
        counts.update(part["counts"])
    events = conversations * growth.per
    return {
        "seconds": seconds,
        "events_per_s": events / seconds,
        "workers": workers,
        "batch": growth.batch,
        # Summed over the workers: their seconds generating, appending, and counting what each
        # query should find (the view read, the words split): the build's rate is the appends'.
        "generate_s": sum(part["generate_s"] for part in parts),
        "append_s": sum(part["append_s"] for part in parts),
        "check_s": sum(part["check_s"] for part in parts),
        "payload_bytes_mean": sum(part["payload_bytes"] for part in parts) / events,
        "counts": counts,
    }


def _sqlite_path(url: str, name: str) -> Path:
    return Path(url.split("///", 1)[1]).with_name(f"search-{name}.db")


def _remove_sqlite(path: Path) -> None:
    for written in path.parent.glob(path.name + "*"):
        written.unlink()


def _server(url: str) -> Any:
    """An autocommit engine on the server's maintenance database (``postgres``)."""
    server = make_url(url).set(drivername="postgresql+psycopg", database="postgres")
    return create_engine(server, isolation_level="AUTOCOMMIT")


def _copy_name(url: str) -> str:
    return f"{str(make_url(url).database)[:50]}_noindex"


def index_store_url(url: str) -> tuple[str, str | None]:
    """Where the store with the index is made: URL and schema."""
    if url.startswith("sqlite"):
        return f"sqlite:///{_sqlite_path(url, 'index')}", None
    return url, SCHEMA


def make_index_store(url: str) -> None:
    """A fresh, empty store where ``index_store_url`` says."""
    target, schema = index_store_url(url)
    if schema is None:
        _remove_sqlite(_sqlite_path(url, "index"))
    else:
        with EventStore(url) as setup, setup.engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    with EventStore(target, schema=schema) as store:
        store.create_schema()


def copy_without_index(url: str) -> tuple[str, str | None]:
    """A copy of the store with the index, the index removed; its URL and schema. No
    connection to the store may be open (PostgreSQL copies a database no one is in)."""
    return _copy_sqlite(url) if url.startswith("sqlite") else _copy_postgres(url)


def _copy_sqlite(url: str) -> tuple[str, None]:
    source, target = _sqlite_path(url, "index"), _sqlite_path(url, "noindex")
    _remove_sqlite(target)
    with closing(sqlite3.connect(source)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(source, target)
    with closing(sqlite3.connect(target)) as conn, conn:
        for trigger in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER events_search_{trigger}")
        conn.execute("DROP TABLE events_search")
    return f"sqlite:///{target}", None


def _copy_postgres(url: str) -> tuple[str, str]:
    name, source = _copy_name(url), str(make_url(url).database)
    server = _server(url)
    try:
        with server.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            for attempt in range(10):  # an autovacuum worker may still be leaving it
                try:
                    conn.exec_driver_sql(
                        f'CREATE DATABASE "{name}" TEMPLATE "{source}" STRATEGY FILE_COPY'
                    )
                    break
                except DBAPIError:
                    if attempt == 9:
                        raise
                    time.sleep(2)
    finally:
        server.dispose()
    copy_url = make_url(url).set(database=name).render_as_string(hide_password=False)
    with EventStore(copy_url, schema=SCHEMA) as store, store.engine.begin() as conn:
        conn.exec_driver_sql(f'DROP INDEX "{SCHEMA}".ix_events_search')
    return copy_url, SCHEMA


def drop_stores(url: str) -> None:
    if url.startswith("sqlite"):
        _remove_sqlite(_sqlite_path(url, "index"))
        _remove_sqlite(_sqlite_path(url, "noindex"))
        return
    with EventStore(url) as setup, setup.engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    server = _server(url)
    try:
        with server.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{_copy_name(url)}" WITH (FORCE)')
    finally:
        server.dispose()


def has_index(store: EventStore) -> bool:
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            found = conn.exec_driver_sql(
                "SELECT count(*) FROM sqlite_master WHERE name LIKE 'events_search%'"
            )
        else:
            found = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() "
                "AND indexname = 'ix_events_search'"
            )
        return bool(found.scalar_one())


def sizes(store: EventStore) -> dict[str, int | None]:
    """The store's bytes, and the index's where the backend tells them apart."""
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
            size = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
            return {"store_bytes": int(pages) * int(size), "index_bytes": None}
        row = conn.execute(
            text(
                "SELECT pg_total_relation_size('events'), pg_relation_size('ix_events_search'), "
                "(SELECT sum(pg_total_relation_size(format('%I.%I', schemaname, tablename))) "
                "FROM pg_tables WHERE schemaname = current_schema())"
            )
        ).one()
        return {"events_bytes": int(row[0]), "index_bytes": int(row[1]), "store_bytes": int(row[2])}


def freed_bytes(url: str) -> int:
    """SQLite: the pages the copy's dropped index left free, in bytes."""
    with closing(sqlite3.connect(url.split("///", 1)[1])) as conn:
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(free) * int(size)


def vacuum(store: EventStore) -> float:
    """``VACUUM (ANALYZE)`` of the store's tables on PostgreSQL, what autovacuum does to a
    table that grew this much (bench_scale's); seconds taken (0 on SQLite)."""
    if store.engine.dialect.name != "postgresql":
        return 0.0
    names = ", ".join(f'"{name}"' for name in tables.metadata.tables)  # on the search_path
    began = time.perf_counter()
    with store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            f"VACUUM (ANALYZE) {names}"
        )
    return time.perf_counter() - began


# -- searches ----------------------------------------------------------------------------


@dataclass
class Cell:
    query: str  # a name of QUERIES
    scope: str  # one of SCOPES
    window: str  # a name of WINDOWS
    conversation: str | None
    expected: int  # events that match, in the generated data
    samples: list[float] = field(default_factory=list)
    spent: float = 0.0
    hits: int = 0
    more: bool = False

    @property
    def name(self) -> str:
        return f"{self.query}/{self.scope}/{self.window}"

    def run(self, store: EventStore, limit: int) -> float:
        began = time.perf_counter()
        page = store.search(
            QUERIES[self.query],
            conversation_id=self.conversation,
            window=WINDOWS[self.window],
            limit=limit,
        )
        took = time.perf_counter() - began
        self.hits, self.more = len(page.hits), page.next_cursor is not None
        return took


def _quantile(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(len(samples) * q))]


def measure_searches(
    store: EventStore,
    *,
    counts: dict[str, dict[str, dict[str, int]]],
    searched: str,
    repeat: int,
    budget: float,
    limit: int,
) -> list[Cell]:
    """Every query, scope and window, the cells taking turns (see the module's docstring)."""
    cells = []
    for query in QUERIES:
        for scope in SCOPES:
            for window in WINDOWS:
                found = (
                    sum(c[query][window] for c in counts.values())
                    if scope == "store"
                    else counts[searched][query][window]
                )
                key = None if scope == "store" else searched
                cells.append(Cell(query, scope, window, key, found))
    for cell in cells:  # the warm-up
        cell.run(store, limit)

    def done(cell: Cell) -> bool:
        if len(cell.samples) >= repeat:
            return True
        # Past the budget: MIN_RUNS runs, or fewer when they alone took twice the budget.
        return cell.spent >= budget and (len(cell.samples) >= MIN_RUNS or cell.spent >= 2 * budget)

    while not all(done(cell) for cell in cells):
        for cell in cells:
            if not done(cell):
                took = cell.run(store, limit)
                cell.samples.append(took)
                cell.spent += took
    return cells


def _figures(cell: Cell, limit: int) -> dict[str, Any]:
    return {
        "runs": len(cell.samples),
        "p50_ms": median(cell.samples) * 1e3,
        "p95_ms": _quantile(cell.samples, 0.95) * 1e3,
        "min_ms": min(cell.samples) * 1e3,
        "max_ms": max(cell.samples) * 1e3,
        "hits": cell.hits,
        "more": cell.more,
        "matches": cell.expected,
        "expected_hits": min(limit, cell.expected),
        "as_expected": cell.hits == min(limit, cell.expected)
        and cell.more == (cell.expected > limit),
    }


def explain(store: EventStore, cell: Cell, limit: int) -> list[str]:
    """The plan of the statement ``store.search`` sends for ``cell`` (as search_api.py builds
    it): PostgreSQL's ``EXPLAIN (ANALYZE, BUFFERS)``, SQLite's ``EXPLAIN QUERY PLAN``."""
    from viewstore.domain import search as rules  # noqa: PLC0415 - as search_api.py does
    from viewstore.store.read import lineage, reads  # noqa: PLC0415 - as above
    from viewstore.store.read import search as statements  # noqa: PLC0415 - as above

    dialect = store.engine.dialect.name
    with store.engine.connect() as conn:
        segments = live = None
        if cell.conversation is not None:
            segments = lineage.segments(conn, reads.conversation_row(conn, cell.conversation))
            live = sorted(set(reads.read_view(conn, cell.conversation, None).event_ids))
        sql, params = statements.statement(
            dialect,
            rules.words(QUERIES[cell.query]),
            statements.Filters(
                searched=cell.conversation,
                segments=segments,
                window=WINDOWS[cell.window],
                live_ids=live,
            ),
            None,
            limit + 1,
        )
        if dialect == "postgresql":
            rows = conn.execute(text("EXPLAIN (ANALYZE, BUFFERS) " + sql), params)
            return [str(row[0]) for row in rows]
        rows = conn.execute(text("EXPLAIN QUERY PLAN " + sql), params)
        depth: dict[int, int] = {0: 0}
        lines = []
        for node, parent, _unused, detail in rows:
            depth[node] = depth.get(parent, 0) + 1
            lines.append("  " * (depth[node] - 1) + str(detail))
        return lines


# -- appends -----------------------------------------------------------------------------


@dataclass
class Arm:
    name: str
    store: EventStore
    samples: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def run_block(self, keys: list[str], events: list[list[dict[str, Any]]], chunk: Any) -> None:
        append = self.store.append
        started = time.perf_counter()
        for c, i in chunk:
            before = time.perf_counter()
            append(keys[c], [events[c][i]])
            self.samples.append(time.perf_counter() - before)
        checkpoint(self.store)
        self.seconds += time.perf_counter() - started


def measure_appends(
    arms: list[Arm], *, appends: int, conversations: int, block: int, seed: int, scale: float
) -> dict[str, Any]:
    per = -(-appends // conversations) + WARM
    events = [
        generate(per, seed + c, condense=True, text_scale=scale)[:per] for c in range(conversations)
    ]
    keys = [f"append-{c:03d}" for c in range(conversations)]
    for arm in arms:
        for c, key in enumerate(keys):
            for i in range(WARM):
                arm.store.append(key, [events[c][i]])
        checkpoint(arm.store)
    order = [(c, i) for i in range(WARM, per) for c in range(conversations)][:appends]
    for b, start in enumerate(range(0, len(order), block)):
        chunk = order[start : start + block]
        for arm in arms if b % 2 == 0 else arms[::-1]:
            arm.run_block(keys, events, chunk)
    for arm in arms:
        for key in keys:
            report = arm.store.verify(key)
            assert report.ok, report.problems
    found: dict[str, Any] = {}
    for arm in arms:
        found[arm.name] = {
            "appends": len(arm.samples),
            "events_per_s": len(arm.samples) / arm.seconds,
            "median_ms": median(arm.samples) * 1e3,
            "p95_ms": _quantile(arm.samples, 0.95) * 1e3,
            "p99_ms": _quantile(arm.samples, 0.99) * 1e3,
            "max_ms": max(arm.samples) * 1e3,
            "mean_ms": sum(arm.samples) / len(arm.samples) * 1e3,
        }
    with_index, without = found["index"], found["noindex"]
    ratio = with_index["median_ms"] / without["median_ms"]
    return {
        **found,
        "conversations": conversations,
        "block": block,
        "ratio_median": ratio,
        "ratio_mean": with_index["mean_ms"] / without["mean_ms"],
        "target": f"<= {TARGET}",
        "met": ratio <= TARGET,
    }


# -- the run -----------------------------------------------------------------------------


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with EventStore(args.url) as probe:
        backend = probe.engine.dialect.name
    workers = 1 if backend == "sqlite" else args.workers
    per = max(WARM + 1, args.events // args.conversations)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "backend": backend,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "load_start": _load(),
        "events": per * args.conversations,
        "conversations": args.conversations,
        "per_conversation": per,
        "text_scale": args.text_scale,
        "limit": args.limit,
        "queries": dict(QUERIES),
    }
    target, schema = index_store_url(args.url)
    stores: list[EventStore] = []
    try:
        make_index_store(args.url)
        _progress(f"storing {results['events']} events by {workers} process(es)")
        growth = Growth(target, schema, per, args.seed, args.text_scale, args.batch)
        built = build(growth, args.conversations, workers)
        counts = built.pop("counts")
        store = EventStore(target, schema=schema)
        stores.append(store)
        built["vacuum_s"] = vacuum(store)
        results["build"] = built
        results["sizes"] = sizes(store)
        results["matches_store_wide"] = {
            name: sum(c[name]["none"] for c in counts.values()) for name in QUERIES
        }
        searched = _key(args.conversations // 2)
        _progress(f"searches: {len(QUERIES)} queries x {len(SCOPES)} scopes x {len(WINDOWS)}")
        cells = measure_searches(
            store,
            counts=counts,
            searched=searched,
            repeat=args.repeat,
            budget=args.budget,
            limit=args.limit,
        )
        results["searched_conversation"] = searched
        results["search"] = {cell.name: _figures(cell, args.limit) for cell in cells}
        results["plans"] = {
            cell.name: explain(store, cell, args.limit)
            for cell in cells
            if median(cell.samples) * 1e3 > args.explain_over
        }
        store.close()
        stores.clear()
        _progress("copying the store, the index removed")
        began = time.perf_counter()
        copy_url, copy_schema = copy_without_index(args.url)
        results["copy_s"] = time.perf_counter() - began
        if backend == "sqlite":
            results["sizes"]["index_bytes"] = freed_bytes(copy_url)
        arms = [
            Arm("index", EventStore(target, schema=schema)),
            Arm("noindex", EventStore(copy_url, schema=copy_schema)),
        ]
        stores.extend(arm.store for arm in arms)
        assert has_index(arms[0].store) and not has_index(arms[1].store)
        _progress(f"{args.appends} one-event appends, with and without the index")
        results["appends"] = measure_appends(
            arms,
            appends=args.appends,
            conversations=args.append_conversations,
            block=args.block,
            seed=args.seed + 10_000,
            scale=args.text_scale,
        )
    finally:
        for opened in stores:
            opened.close()
        if not args.keep:
            drop_stores(args.url)
    results["load_end"] = _load()
    return results


def report(results: dict[str, Any]) -> str:
    b, s = results["build"], results["sizes"]
    index_mb = "?" if s["index_bytes"] is None else f"{s['index_bytes'] / 2**20:.0f}"
    lines = [
        f"full-text search ({results['backend']}): {results['events']} events "
        f"({b['payload_bytes_mean']:.0f} B on average) in {results['conversations']} condensed "
        f"conversations; load {results['load_start']} -> {results['load_end']}",
        f"  build: {b['seconds']:.0f} s = {b['events_per_s']:.0f} events/s ({b['workers']} "
        f"process(es), appends of {b['batch']}; summed: generating {b['generate_s']:.0f} s, "
        f"appending {b['append_s']:.0f} s, counting {b['check_s']:.0f} s), vacuum "
        f"{b['vacuum_s']:.0f} s; store {s['store_bytes'] / 2**20:.0f} MiB, index {index_mb} MiB",
        "  matches store-wide: "
        + ", ".join(
            f"{name} {QUERIES[name]!r} {count} ({count / results['events']:.1%})"
            for name, count in results["matches_store_wide"].items()
        ),
        f"  {'query/scope/window':<30} {'runs':>4} {'p50 ms':>9} {'p95 ms':>9} {'hits':>5} "
        f"{'matches':>8} {'ok':>3}",
    ]
    for name, r in results["search"].items():
        lines.append(
            f"  {name:<30} {r['runs']:>4} {r['p50_ms']:>9.2f} {r['p95_ms']:>9.2f} {r['hits']:>5}"
            f" {r['matches']:>8} {'yes' if r['as_expected'] else 'NO':>3}"
        )
    a = results["appends"]
    lines.append(
        f"  one-event appends to {a['conversations']} fresh conversations, blocks of "
        f"{a['block']}, the store copied whole and the copy's index removed "
        f"({results['copy_s']:.0f} s):"
    )
    lines.append(
        f"  {'arm':<8} {'appends':>7} {'events/s':>9} {'median ms':>10} {'p95 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8} {'mean ms':>8}"
    )
    for name in ("index", "noindex"):
        r = a[name]
        lines.append(
            f"  {name:<8} {r['appends']:>7} {r['events_per_s']:>9.0f} {r['median_ms']:>10.3f} "
            f"{r['p95_ms']:>8.3f} {r['p99_ms']:>8.3f} {r['max_ms']:>8.1f} {r['mean_ms']:>8.3f}"
        )
    lines.append(
        f"  with / without the index: median {a['ratio_median']:.2f}x (goal {a['target']}, "
        f"{'met' if a['met'] else 'NOT met'}), mean {a['ratio_mean']:.2f}x"
    )
    for name, plan in results["plans"].items():
        lines.append(f"  plan of {name}:")
        lines.extend(f"    {line}" for line in plan)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the store")
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--batch", type=int, default=10_000, help="events per append (build)")
    parser.add_argument("--workers", type=int, default=2, help="PostgreSQL: building processes")
    parser.add_argument("--text-scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=30, help="timed runs of each search")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per search cell")
    parser.add_argument("--limit", type=int, default=20, help="a search's page")
    parser.add_argument("--explain-over", type=float, default=1000.0, help="ms: plans of slower")
    parser.add_argument("--appends", type=int, default=3000, help="timed appends per arm")
    parser.add_argument("--append-conversations", type=int, default=10)
    parser.add_argument("--block", type=int, default=50, help="appends per arm in a turn")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--keep", action="store_true", help="leave the stores behind")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    print(report(results))
    save(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
