"""One store grown in stages: does each page and each single-conversation operation cost the
same at every size (issue 27)?

    .venv/bin/python -m benchmarks.bench_scale --url URL [--stages 1000,10000,100000]
        [--million] [--repeat N] [--workers N] [--partitions N] [--no-vacuum] [--output PATH]

Conversations of ten events each are appended through the public API as workers would (in
transactions of ``--batch`` conversations, ``store.begin()``, to grow the store fast; by
``--workers`` processes at once, each its own share; ``--batch 1``: each conversation one
plain ``append``, the fast path, which on PostgreSQL grows faster with several workers), up to
each stage's count; at each stage
every operation is run ``--repeat`` times and its median reported in milliseconds, then the
ratio of the last stage's median to the first's (about 1: it does not grow with the store).
``--million`` adds a stage of 1,000,000 conversations. ``--partitions N`` (PostgreSQL) makes
the store hash-partitioned (``viewstore init --partitions N``).

On PostgreSQL each stage's growth is followed by ``VACUUM (ANALYZE)`` of the store's tables,
what autovacuum does to a table that grew this much on a server with the default settings
(``--no-vacuum`` skips it: a server with autovacuum off then plans without statistics).

The per-conversation operations are measured twice. "Cold": each call on a conversation picked
at random, which on a store larger than memory is mostly read from disk. "Warm" (the
``_warm`` rows): every call on one conversation, read once before; this is what the code costs
once the conversation's pages are cached, the page cache's size aside.

Operations: ``verify`` of one conversation; ``conversations(limit=50)`` in every order
(``updated_at`` both ways, ``version`` and ``view_length`` descending, ``id``, ``created_at``)
and with each filter (``updated_since``, ``min_view_length``); a keyset page 90% deep in the
``updated_at`` order (``after=``), and the same page by ``offset`` for comparison (it reads
every row it skips); the inactive scan (``inactive_conversations``, prune's);
``conversation_count()`` (a count: it may grow); ``conversation_count_estimate()`` (the
viewer's header: an estimate above 10,000); a page of the change feed 90% deep (``after=``);
the viewer's list page ``GET /``, its next page 90% deep (``after=``) and a conversation's page
``GET /c/<id>``, in-process through Starlette's TestClient; ``search``, a page of the
conversations whose id contains five characters of one (a trigram index on PostgreSQL with
pg_trgm, else every id: it may grow); an append of one event to an existing conversation;
``view`` of one conversation.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from starlette.testclient import TestClient

from benchmarks.bench_store import fresh_events, median, save
from viewstore import ConversationInfo, EventStore
from viewstore.store.cursors import feed_cursor as encode_cursor
from viewstore.store.database import schema
from viewstore.web import create_app

DEFAULT_STAGES = "1000,10000,100000"
EVENTS = 10
#: Operations whose cost may grow with the store (reported, not held to the target).
GROWING = ("offset_page_deep", "conversation_count", "search")
#: Operations whose write-ahead log volume is reported on PostgreSQL: a cold append dirties
#: pages no append touched since the last checkpoint, each logged whole the first time.
WAL_MEASURED = ("append", "append_warm")


def _key(i: int) -> str:
    return f"scale-{i:08d}"


def _id_cursor(key: str) -> str:
    """A cursor of the order by id just at ``key``: only the id counts in that order."""
    now = datetime.now(UTC)
    return ConversationInfo(key, now, now, 0, 0, False, None).cursor("id")


@dataclass(frozen=True)
class Growth:
    """How the store grows: its URL, each conversation's events (event ids are unique per
    conversation only, so every conversation may carry the same ten), conversations per
    transaction and processes."""

    url: str
    events: list[dict[str, Any]]
    batch: int
    workers: int


def _grow_share(growth: Growth, start: int, stop: int) -> None:
    """One worker's share of ``start .. stop - 1``: every ``workers``-th batch from ``start``."""
    store = EventStore(growth.url)
    step = growth.batch * growth.workers
    try:
        if growth.batch == 1:  # each conversation its own transaction, on the fast path
            for i in range(start, stop, step):
                store.append(_key(i), growth.events, expected_version=0)
            return
        for low in range(start, stop, step):
            with store.begin() as conn:
                for i in range(low, min(low + growth.batch, stop)):
                    store.append(_key(i), growth.events, expected_version=0, connection=conn)
    finally:
        store.close()


def grow(growth: Growth, start: int, stop: int) -> float:
    """Append conversations ``start .. stop - 1`` by ``growth.workers`` processes; seconds."""
    began = time.perf_counter()
    if growth.workers == 1:
        _grow_share(growth, start, stop)
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(growth.workers, mp_context=context) as pool:
            shares = [
                pool.submit(_grow_share, growth, start + n * growth.batch, stop)
                for n in range(growth.workers)
            ]
            for share in shares:
                share.result()
    return time.perf_counter() - began


def wal_position(store: EventStore) -> int | None:
    """PostgreSQL's write-ahead log position in bytes (None on SQLite): what an append wrote
    to the log, full-page images included, is the difference of two. The insert position, not
    the write position: on a server with ``synchronous_commit=off`` the latter moves only when
    the WAL writer next flushes, so an append could measure 0 bytes."""
    if store.engine.dialect.name != "postgresql":
        return None
    with store.engine.connect() as conn:
        position = conn.exec_driver_sql("SELECT pg_current_wal_insert_lsn() - '0/0'")
        return int(position.scalar_one())


def vacuum(store: EventStore) -> float:
    """``VACUUM (ANALYZE)`` of the store's tables on PostgreSQL; seconds taken (0 on SQLite)."""
    if store.engine.dialect.name != "postgresql":
        return 0.0
    # Unqualified: the store's connections have its schema alone on their search_path.
    tables = ", ".join(f'"{name}"' for name in schema.metadata.tables)
    began = time.perf_counter()
    with store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            f"VACUUM (ANALYZE) {tables}"
        )
    return time.perf_counter() - began


def _feed_cursor(store: EventStore, key: str) -> str:
    """The feed's cursor just before ``key``'s first event."""
    log = schema.events
    with store.engine.connect() as conn:
        txid, position = conn.execute(
            select(log.c.txid, log.c.position).where(log.c.conversation_id == key, log.c.seq == 1)
        ).one()
    return encode_cursor(txid, position - 1)


def catalogue_operations(
    store: EventStore, size: int, before: datetime, rng: random.Random, deep_cursor: str
) -> dict[str, Callable[[], object]]:
    """The catalogue's pages, orders and filters, the inactive scan and the feed;
    ``deep_cursor`` marks a row 90% deep in the ``updated_at`` order, descending."""
    feed_cursor = _feed_cursor(store, _key(size * 9 // 10))

    def catalogue(**options: Any) -> Callable[[], object]:
        return lambda: store.conversations(limit=50, **options)

    return {
        "catalogue_updated_desc": catalogue(order_by="updated_at", descending=True),
        "catalogue_version_desc": catalogue(order_by="version", descending=True),
        "catalogue_id": catalogue(order_by="id"),
        "catalogue_created_at": catalogue(order_by="created_at"),
        "catalogue_updated_asc": catalogue(order_by="updated_at"),
        "catalogue_view_length_desc": catalogue(order_by="view_length", descending=True),
        "updated_since": catalogue(order_by="updated_at", updated_since=before),
        "min_view_length": catalogue(order_by="view_length", min_view_length=EVENTS // 2),
        "keyset_page_deep": catalogue(order_by="updated_at", descending=True, after=deep_cursor),
        "offset_page_deep": catalogue(
            order_by="updated_at", descending=True, offset=size * 9 // 10
        ),
        "inactive_conversations": lambda: store.inactive_conversations(before=before, limit=100),
        "conversation_count": store.conversation_count,
        "count_for_header": store.conversation_count_estimate,
        "search": lambda: store.conversations(search=_key(rng.randrange(size))[-5:], limit=50),
        "feed_page_deep": lambda: store.feed(after=feed_cursor, limit=100),
    }


def operations(
    store: EventStore, size: int, before: datetime, rng: random.Random, client: TestClient
) -> dict[str, Callable[[], object]]:
    """Every operation timed at a stage: the catalogue's, the viewer's pages, and the
    per-conversation ones, cold (a conversation picked at random) and warm (``hot``)."""
    deep = store.conversations(order_by="id", limit=1, after=_id_cursor(_key(size // 10)))[0]
    deep_cursor = deep.cursor("updated_at", descending=True)
    deep_link = f"/?sort=updated&order=desc&after={deep_cursor}"
    appended = iter(range(10**9))
    hot = _key(rng.randrange(size))  # the warm operations' conversation

    def pick() -> str:
        return _key(rng.randrange(size))

    def append_one(key: str | None = None) -> object:
        n = next(appended)
        return store.append(key or pick(), [{"kind": "MessageEvent", "id": f"late-{size}-{n}"}])

    def page(url: str) -> object:
        answer = client.get(url)
        assert answer.status_code == 200, answer.text[:200]
        return answer

    return {
        "verify_one": lambda: store.verify(pick()),
        "verify_one_warm": lambda: store.verify(hot),
        **catalogue_operations(store, size, before, rng, deep_cursor),
        "viewer_list_page": lambda: page("/"),
        "viewer_next_page_deep": lambda: page(deep_link),
        "viewer_conversation_page": lambda: page(f"/c/{pick()}"),
        "viewer_conversation_page_warm": lambda: page(f"/c/{hot}"),
        "append": append_one,
        "append_warm": lambda: append_one(hot),
        "view": lambda: store.view(pick()),
        "view_warm": lambda: store.view(hot),
    }


def measure(
    url: str,
    stages: list[int],
    repeat: int,
    batch: int,
    seed: int,
    *,
    workers: int = 1,
    partitions: int | None = None,
    vacuum_after_growth: bool = True,
) -> dict[str, Any]:
    rng = random.Random(seed)
    store = EventStore(url)
    store.create_schema(partitions=partitions)
    growth = Growth(url, fresh_events(EVENTS, seed), batch, workers)
    result: dict[str, Any] = {
        "backend": store.engine.dialect.name,
        "partitions": partitions,
        "events_each": EVENTS,
        "workers": workers,
        "vacuum": vacuum_after_growth,
        "stages": [],
        "median_ms": {},
        "wal_bytes_per_call": {},
    }
    size, before = 0, None
    client = TestClient(create_app(store))
    try:
        for stage in stages:
            if before is None:  # the inactive scan's moment: after the first stage's first half
                grow_s = grow(growth, size, stage // 2)
                time.sleep(0.01)
                before = datetime.now(UTC)
                grow_s += grow(growth, stage // 2, stage)
            else:
                grow_s = grow(growth, size, stage)
            vacuum_s = vacuum(store) if vacuum_after_growth else 0.0
            size = stage
            medians = {}
            for name, fn in operations(store, size, before, rng, client).items():
                fn()  # warm: the first call pays for connections and plans
                samples = []
                wal = wal_position(store)
                for _ in range(repeat):
                    start = time.perf_counter()
                    fn()
                    samples.append(time.perf_counter() - start)
                medians[name] = round(median(samples) * 1000, 2)
                result["median_ms"].setdefault(name, []).append(medians[name])
                if name in WAL_MEASURED and wal is not None:
                    written = (wal_position(store) or wal) - wal
                    result["wal_bytes_per_call"].setdefault(name, []).append(written // repeat)
            result["stages"].append(
                {
                    "conversations": stage,
                    "grow_s": round(grow_s, 1),
                    "vacuum_s": round(vacuum_s, 3),
                    "median_ms": medians,
                }
            )
            print(
                f"  {stage:>9,} conversations (grown in {grow_s:.1f} s, "
                f"vacuumed in {vacuum_s:.1f} s): "
                + ", ".join(f"{k} {v}" for k, v in medians.items()),
                flush=True,
            )
    finally:
        client.close()
        store.close()
    result["ratio_last_first"] = {
        name: round(values[-1] / values[0], 2) if values[0] else None
        for name, values in result["median_ms"].items()
    }
    return result


def table(result: dict[str, Any]) -> str:
    sizes = [f"{stage['conversations']:,}" for stage in result["stages"]]
    backend = result["backend"]
    if result.get("partitions"):
        backend += f", {result['partitions']} partitions"
    lines = [
        f"| operation ({backend}, ms) | " + " | ".join(sizes) + " | last/first |",
        "|---" * (len(sizes) + 2) + "|",
    ]
    for name, values in result["median_ms"].items():
        note = " (may grow)" if name in GROWING else ""
        lines.append(
            f"| {name}{note} | "
            + " | ".join(f"{v}" for v in values)
            + f" | {result['ratio_last_first'][name]} |"
        )
    for name, values in result.get("wal_bytes_per_call", {}).items():
        ratio = round(values[-1] / values[0], 2) if values[0] else None
        lines.append(
            f"| {name}: WAL bytes a call | " + " | ".join(f"{v}" for v in values) + f" | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--stages", default=DEFAULT_STAGES, help="conversation counts, ascending")
    parser.add_argument("--million", action="store_true", help="add a stage of 1,000,000")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--batch",
        type=int,
        default=500,
        help="conversations per transaction (1: each its own append, as a worker makes it)",
    )
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--workers", type=int, default=1, help="processes growing the store")
    parser.add_argument("--partitions", type=int, help="PostgreSQL: hash partitions")
    parser.add_argument(
        "--no-vacuum", action="store_true", help="PostgreSQL: no VACUUM (ANALYZE) after growth"
    )
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    stages = [int(value) for value in args.stages.split(",") if value.strip()]
    if args.million and 1_000_000 not in stages:
        stages.append(1_000_000)
    if not stages or stages != sorted(set(stages)) or stages[0] < 20:
        parser.error("--stages: ascending conversation counts, the first at least 20")
    print(f"scale: stages {', '.join(f'{s:,}' for s in stages)}", flush=True)
    if args.workers < 1:
        parser.error("--workers: at least 1")
    result = measure(
        args.url,
        stages,
        args.repeat,
        args.batch,
        args.seed,
        workers=args.workers,
        partitions=args.partitions,
        vacuum_after_growth=not args.no_vacuum,
    )
    print(table(result), flush=True)
    save(args.output, result)
    return result


if __name__ == "__main__":
    main()
