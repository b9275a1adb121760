"""Benchmarks of the SQL store against the raw-SQL floor, on the same database in the same run.

    python -m benchmarks.bench_store --url sqlite:///bench.db
    python -m benchmarks.bench_store --url postgresql+psycopg://postgres@127.0.0.1/bench

Every figure that has a target is a ratio of two medians measured here, interleaved in blocks so
that machine noise hits both sides alike:

1. one-event append with projection vs a raw ``INSERT`` + ``COMMIT`` of the same payload into a
   bare table through the same engine (throughput ratio, target >= 0.85);
2. one-event append at a history of 20,000 events vs 100 (cost ratio, target <= 1.15);
3. batched appends (100 events a call), and one condensation on a 10,000-event view;
4. reading the current 10,000-event view vs a raw indexed ``SELECT`` of the same payload rows
   (target <= 1.2), and an as-of read of an old view vs the current read (target <= 2); both
   sides end with every payload in memory; the ``Event`` objects a ``StoredView`` builds on
   first access are timed too, as a separate figure;
5. 1, 2 and 4 writer processes on distinct conversations (target: 4 writers >= 1.6x one);
6. ``rebuild`` and ``resume_view`` of a 20,000-event conversation (events/s);
7. peak Python memory (tracemalloc) of appending and of reading a 20,000-event conversation.

It prints a table and writes ``benchmarks/results/store-<backend>.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, Text, insert, text

from benchmarks.bench_view import generate
from viewstore import EventStore, View, parse_event
from viewstore.store.database.engine import WRITE

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 100

_raw_meta = MetaData()
raw_events = Table(
    "bench_raw_events",
    _raw_meta,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(255), nullable=False, index=True),
    Column("event_id", String(512), nullable=False),
    Column("payload", Text, nullable=False),
)


def save(path: Path | None, result: dict[str, Any]) -> None:
    """Write a benchmark's result as JSON where ``--output`` says (nowhere if not given)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def checkpoint(store: EventStore) -> None:
    """SQLite: copy the WAL into the database file now (PostgreSQL checkpoints in the
    background). Every timed block starts from an empty WAL and ends with this checkpoint,
    timed: the block then pays for the pages it wrote, and for nothing else. Left alone,
    SQLite checkpoints whenever the WAL passes a thousand pages, and that cost (fsyncs, a
    few milliseconds) lands on whichever block crosses the line: in an interleaving, often
    the same side every time. Blocks are long (200 appends), so the automatic checkpoints a
    block runs into are the ones a steady writer meets."""
    if store.engine.dialect.name == "sqlite":
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")


def timed_block(store: EventStore, fn: Callable[[], object], count: int) -> float:
    """Seconds per operation of ``fn`` (``count`` of them), its checkpoint included."""
    return timed(lambda: (fn(), checkpoint(store))) / count


def fresh_events(n: int, seed: int) -> list[dict[str, Any]]:
    """Plain (condensation-free) realistic events with ids unique to this call."""
    events = generate(n, seed, condense=False)[:n]
    prefix = uuid.uuid4().hex[:8]
    for event in events:
        event["id"] = f"{prefix}-{event['id']}"
    return events


def settled(events: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first ``n`` events or a few more, ending settled: on a user message (no tool loop
    open) that left the view's end a manipulation index (no tool call pending)."""
    view = View()
    for count, event in enumerate(events, start=1):
        view.append_event(parse_event(event))
        if (
            count >= n
            and event["kind"] == "MessageEvent"
            and event.get("source") == "user"
            and len(view.events) in view.manipulation_indices
        ):
            return events[:count]
    raise ValueError("no settled point in the generated events")


def build(store: EventStore, key: str, events: list[dict[str, Any]]) -> None:
    for start in range(0, len(events), 500):
        store.append(key, events[start : start + 500])


# -- 1 and 2: single appends ------------------------------------------------------------------


def measure_single_append(store: EventStore, blocks: int, block: int, seed: int) -> dict[str, Any]:
    """Interleaved blocks: viewstore appends, then raw inserts of the same payloads."""
    engine = store.engine.execution_options(**WRITE)
    key = f"single-{uuid.uuid4().hex[:8]}"
    events = fresh_events(blocks * block + 10, seed)
    build(store, key, events[:10])
    ours: list[float] = []
    raw: list[float] = []
    cursor = 10
    checkpoint(store)
    for _ in range(blocks):
        chunk = events[cursor : cursor + block]
        cursor += block

        def run_ours(chunk: list[dict[str, Any]] = chunk) -> None:
            for event in chunk:
                store.append(key, [event])

        def run_raw(chunk: list[dict[str, Any]] = chunk) -> None:
            for event in chunk:
                payload = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
                with engine.begin() as conn:
                    conn.execute(
                        insert(raw_events),
                        {"conversation_id": key, "event_id": event["id"], "payload": payload},
                    )

        ours.append(timed_block(store, run_ours, block))
        raw.append(timed_block(store, run_raw, block))
    ratio = median(raw) / median(ours)  # throughput ratio = cost(raw) / cost(ours)
    return {
        "viewstore_ms": median(ours) * 1e3,
        "raw_ms": median(raw) * 1e3,
        "throughput_ratio": ratio,
        "target": ">= 0.85",
        "met": ratio >= 0.85,
    }


def measure_history_cost(
    store: EventStore, large: int, blocks: int, block: int, seed: int
) -> dict[str, Any]:
    small_key = f"hist-small-{uuid.uuid4().hex[:8]}"
    large_key = f"hist-large-{uuid.uuid4().hex[:8]}"
    build(store, small_key, settled(fresh_events(400, seed), 100))
    build(store, large_key, settled(fresh_events(large + 300, seed + 1), large))
    # Both conversations get the very same tail (ids need only be unique per conversation),
    # after histories that both end settled: otherwise what shows is the tail's events (their
    # size and kind) and the state the history left (a tool call still pending writes no
    # index rows for a while), not the history's length.
    tail = fresh_events(blocks * block, seed + 2)
    small: list[float] = []
    big: list[float] = []
    checkpoint(store)
    for b in range(blocks):
        chunk = tail[b * block : (b + 1) * block]
        for key, samples in ((small_key, small), (large_key, big)):
            samples.append(
                timed_block(store, lambda k=key, c=chunk: [store.append(k, [e]) for e in c], block)
            )
    ratio = median(big) / median(small)
    return {
        "history_small": store.version(small_key) - blocks * block,
        "history_large": store.version(large_key) - blocks * block,
        "small_ms": median(small) * 1e3,
        "large_ms": median(big) * 1e3,
        "cost_ratio": ratio,
        "target": "<= 1.15",
        "met": ratio <= 1.15,
        "large_key": large_key,
    }


# -- 3: batches and a condensation ------------------------------------------------------------


def measure_batches(store: EventStore, calls: int, seed: int) -> dict[str, Any]:
    key = f"batch-{uuid.uuid4().hex[:8]}"
    events = fresh_events(calls * BATCH, seed)
    samples = [
        timed(lambda i=i: store.append(key, events[i * BATCH : (i + 1) * BATCH]))
        for i in range(calls)
    ]
    return {"events_per_call": BATCH, "events_per_s": BATCH / median(samples)}


def condensation_for(
    view_events: list[Any], seed: int, forget_fraction: float = 0.5
) -> dict[str, Any]:
    """A condensation like the summarizing condenser's: a range between two indices."""
    view = View()
    for event in view_events:
        view.append_event(event)
    indices = view.manipulation_indices
    start = indices.find_next(1)
    end = indices.find_next(int(len(view_events) * forget_fraction))
    forgotten = [event.id for event in view.events[start:end]]
    return {
        "id": f"cond-{uuid.uuid4().hex}",
        "timestamp": datetime.now(UTC).isoformat(),
        "source": "environment",
        "forgotten_event_ids": forgotten,
        "summary": "The agent fixed the loader and the tests pass.",
        "summary_offset": start,
        "llm_response_id": f"resp-{seed}",
        "kind": "Condensation",
    }


def measure_condensation(
    store: EventStore, view_size: int, repeat: int, seed: int
) -> dict[str, Any]:
    samples = []
    forgotten = 0
    for r in range(repeat):
        key = f"cond-{uuid.uuid4().hex[:8]}"
        events = fresh_events(view_size, seed + r)
        build(store, key, events)
        condensation = condensation_for([parse_event(e) for e in events], seed)
        forgotten = len(condensation["forgotten_event_ids"])
        samples.append(timed(lambda c=condensation, k=key: store.append(k, [c])))
    return {"view_length": view_size, "forgotten": forgotten, "ms": median(samples) * 1e3}


# -- 4: reads ---------------------------------------------------------------------------------


def measure_reads(store: EventStore, size: int, repeat: int, seed: int) -> dict[str, Any]:
    key = f"read-{uuid.uuid4().hex[:8]}"
    events = fresh_events(size, seed)
    build(store, key, events)
    old = size // 2
    engine = store.engine
    query = text("SELECT payload FROM events WHERE conversation_id = :c ORDER BY seq").bindparams(
        c=key
    )

    def raw() -> None:
        with engine.connect() as conn:
            conn.execute(query).all()

    def built() -> None:
        # The view with every Event object built (StoredView builds them on first access).
        list(store.view(key).events)

    ours, base, as_of, objects = [], [], [], []
    for _ in range(repeat):
        ours.append(timed(lambda: store.view(key)))
        base.append(timed(raw))
        as_of.append(timed(lambda: store.view(key, as_of=old)))
        objects.append(timed(built))
    read_ratio = median(ours) / median(base)
    as_of_ratio = median(as_of) / median(ours)
    return {
        "view_length": size,
        "view_ms": median(ours) * 1e3,
        "raw_select_ms": median(base) * 1e3,
        "view_with_events_built_ms": median(objects) * 1e3,
        "view_with_events_built_ratio": median(objects) / median(base),
        "read_ratio": read_ratio,
        "read_target": "<= 1.2",
        "read_met": read_ratio <= 1.2,
        "as_of_seq": old,
        "as_of_ms": median(as_of) * 1e3,
        "as_of_ratio": as_of_ratio,
        "as_of_target": "<= 2",
        "as_of_met": as_of_ratio <= 2,
    }


# -- 5: writer processes ----------------------------------------------------------------------


def _writer(url: str, key: str, appends: int, seed: int, start: Any, out: Any) -> None:  # noqa: PLR0917
    store = EventStore(url)
    events = fresh_events(appends, seed)
    store.append(key, events[:1])
    start.wait()
    began = time.perf_counter()
    for event in events[1:]:
        store.append(key, [event])
    out.put((appends - 1) / (time.perf_counter() - began))
    store.close()


def measure_writers(url: str, counts: list[int], appends: int, seed: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    result: dict[str, Any] = {}
    for count in counts:
        start = context.Event()
        out = context.Queue()
        procs = [
            context.Process(
                target=_writer,
                args=(url, f"writer-{uuid.uuid4().hex[:8]}", appends, seed + i, start, out),
            )
            for i in range(count)
        ]
        for proc in procs:
            proc.start()
        time.sleep(2.0)  # let every process import, connect and append its first event
        began = time.perf_counter()
        start.set()
        rates = [out.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
        elapsed = time.perf_counter() - began
        result[str(count)] = {
            "total_appends_per_s": count * (appends - 1) / elapsed,
            "per_writer": rates,
        }
    one = result[str(counts[0])]["total_appends_per_s"]
    for count in counts:
        result[str(count)]["speedup"] = result[str(count)]["total_appends_per_s"] / one
    top = result[str(counts[-1])]["speedup"]
    result["target"] = f"{counts[-1]} writers >= 1.6x one"
    result["met"] = top >= 1.6
    return result


# -- 6 and 7: rebuild, resume, memory -----------------------------------------------------------


def measure_rebuild_resume(store: EventStore, key: str, size: int) -> dict[str, Any]:
    rebuild = timed(lambda: store.rebuild(key))
    resume = timed(lambda: store.resume_view(key))
    return {
        "events": size,
        "rebuild_s": rebuild,
        "rebuild_events_per_s": size / rebuild,
        "resume_s": resume,
        "resume_events_per_s": size / resume,
    }


def measure_memory(store: EventStore, size: int, seed: int) -> dict[str, Any]:
    key = f"mem-{uuid.uuid4().hex[:8]}"
    events = fresh_events(size, seed)
    payload_mb = sum(len(json.dumps(e)) for e in events) / 1e6
    tracemalloc.start()
    build(store, key, events)
    _, append_peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    view = store.view(key)
    _, read_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del view
    return {
        "events": size,
        "payload_mb": payload_mb,
        "append_peak_mb": append_peak / 1e6,
        "read_peak_mb": read_peak / 1e6,
    }


# -- driver -----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    store = EventStore(args.url)
    store.create_schema()
    _raw_meta.create_all(store.engine)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "backend": store.engine.dialect.name,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("single_append", lambda: measure_single_append(store, args.blocks, args.block, 1)),
        (
            "history",
            lambda: measure_history_cost(store, args.large, args.blocks, args.block, 2),
        ),
        ("batches", lambda: measure_batches(store, 20, 3)),
        ("condensation", lambda: measure_condensation(store, args.large // 2, 3, 4)),
        ("reads", lambda: measure_reads(store, args.large // 2, args.repeat, 5)),
    ]
    for name, step in steps:
        print(f"... {name}", file=sys.stderr, flush=True)
        results[name] = step()
    large_key = results["history"].pop("large_key")
    print("... rebuild/resume", file=sys.stderr, flush=True)
    results["rebuild_resume"] = measure_rebuild_resume(store, large_key, args.large)
    print("... memory", file=sys.stderr, flush=True)
    results["memory"] = measure_memory(store, args.large, 6)
    if args.writers:
        print("... writers", file=sys.stderr, flush=True)
        results["writers"] = measure_writers(args.url, [1, 2, 4], args.writer_appends, 7)
    store.close()
    return results


def report(results: dict[str, Any]) -> str:
    s, h, r = results["single_append"], results["history"], results["reads"]
    lines = [
        f"viewstore benchmarks on {results['backend']} ({results['date']}, {results['platform']})",
        "",
        f"{'measure':<52} {'figure':>22}  target",
        f"{'1. append+projection vs raw INSERT+COMMIT':<52} "
        f"{s['throughput_ratio']:>21.2f}x  >= 0.85 {'met' if s['met'] else 'NOT met'}",
        f"{'   (ms per append: viewstore / raw)':<52} "
        f"{s['viewstore_ms']:>10.3f} / {s['raw_ms']:.3f}",
        f"{'2. append @' + str(h['history_large']) + ' events vs @100':<52} "
        f"{h['cost_ratio']:>21.2f}x  <= 1.15 {'met' if h['met'] else 'NOT met'}",
        f"{'3. batched appends (100/call), events/s':<52} "
        f"{results['batches']['events_per_s']:>22,.0f}",
        f"{'   condensation on a ' + str(results['condensation']['view_length']) + '-event view, ms':<52} "  # noqa: E501
        f"{results['condensation']['ms']:>22.1f}",
        f"{'4. read ' + str(r['view_length']) + '-event view vs raw SELECT':<52} "
        f"{r['read_ratio']:>21.2f}x  <= 1.2 {'met' if r['read_met'] else 'NOT met'}",
        f"{'   (ms: view / raw SELECT / view + every Event built)':<52} "
        f"{r['view_ms']:>10.1f} / {r['raw_select_ms']:.1f} / {r['view_with_events_built_ms']:.1f}",
        f"{'   as-of read vs current read':<52} "
        f"{r['as_of_ratio']:>21.2f}x  <= 2 {'met' if r['as_of_met'] else 'NOT met'}",
    ]
    if "writers" in results:
        w = results["writers"]
        lines.append(
            f"{'5. writers 1/2/4, appends/s':<52} "
            + " / ".join(f"{w[c]['total_appends_per_s']:.0f}" for c in ("1", "2", "4"))
            + f"  4 writers {w['4']['speedup']:.2f}x  >= 1.6 {'met' if w['met'] else 'NOT met'}"
        )
    rr, m = results["rebuild_resume"], results["memory"]
    lines += [
        f"{'6. rebuild / resume_view of ' + str(rr['events']) + ' events, events/s':<52} "
        f"{rr['rebuild_events_per_s']:>10,.0f} / {rr['resume_events_per_s']:,.0f}",
        f"{'7. peak memory append / read of ' + str(m['events']) + ' events, MB':<52} "
        f"{m['append_peak_mb']:>10.1f} / {m['read_peak_mb']:.1f}  "
        f"(payloads {m['payload_mb']:.1f} MB)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="viewstore store benchmarks")
    parser.add_argument("--url", required=True)
    parser.add_argument("--large", type=int, default=20_000, help="the large history")
    parser.add_argument("--blocks", type=int, default=7, help="interleaved blocks per ratio")
    parser.add_argument("--block", type=int, default=200, help="appends per block")
    parser.add_argument("--repeat", type=int, default=7, help="repetitions of each read")
    parser.add_argument("--writer-appends", type=int, default=300)
    parser.add_argument(
        "--writers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the writer-process scaling (default: on PostgreSQL only)",
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.writers is None:
        args.writers = args.url.startswith("postgres")
    results = run(args)
    text_report = report(results)
    print(text_report)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"store-{results['backend']}.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
