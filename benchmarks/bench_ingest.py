"""Ingest throughput into PostgreSQL from N posting agent servers, and the delay from post to
commit (issue 22). Needs ``openhands-agent-server`` (``.venv-agent-server``).

    .venv-agent-server/bin/python -m benchmarks.bench_ingest --postgres-url URL --output F

1. ``--servers`` real ``openhands-agent-server`` processes (tests/ingest/_fleet.py's
   launchers, a scripted LLM) each run ``--conversations`` conversations of ``--rounds``
   rounds (two parallel ``think`` calls a round; every other conversation condensed) to the
   end, with no webhook: their logs are complete before anything is measured, so the LLM's
   speed is no part of the figures.
2. The ingest: a real ``viewstore ingest`` process on a fresh PostgreSQL database, whose
   sources file names the servers. One posting thread per agent server (as its webhook sender)
   posts its conversations' events, interleaved, in order, in the batches the server's webhook
   sends (``event_buffer_size``, by default the installed ``WebhookSpec``'s default): JSON
   lists of the events as the server serves them, with the Bearer token, a new connection per
   post (the webhook opens one per post). The ingest answers after its transaction commits, so
   a post's latency, from sending to the answer, is the delay from post to commit; it
   includes the ingest's REST read of the server's log. Throughput: events stored / wall time.
   ``--ingest-processes`` repeats this with several ingest processes on one store (the app
   keeps no state, docs/fleet.md), the posting threads spread over them.
3. The baseline, same run: the same batches appended straight to a fresh store
   (``EventStore.append`` with ``expected_version``, from N threads sharing one store as the
   ingest's threads do): no HTTP, no REST reads. Reported: ingest over direct throughput.
   Between the two, where a post's time goes: the REST page each post makes the ingest read,
   alone (no store); and the ingest's work per post (``pull``, the info refresh after a state
   update) called in this process on a fresh store (no HTTP, no uvicorn).
4. Every stored conversation equals its server's log (its REST search), in each store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")

from openhands.agent_server.config import WebhookSpec

from benchmarks.__main__ import scratch_postgres
from tests.ingest._fleet import (
    AgentServer,
    Ingest,
    ScriptedLLM,
    free_port,
    start_agent_server,
    stored_equals_server,
    write_sources,
)
from viewstore import EventStore
from viewstore.ingest.agent_server import AgentServerClient
from viewstore.ingest.app import _refresh_info
from viewstore.ingest.pull import changes_state, pull, wanted_ids
from viewstore.ingest.sources import Source

#: What the agent server's webhook sends per post unless configured otherwise.
DEFAULT_BATCH = int(WebhookSpec.model_fields["event_buffer_size"].default)
START_TIMEOUT = 300.0  # a loaded machine takes its time to import the agent server
RUN_TIMEOUT = 900.0
# Importing the agent server routes the root logger to the console: the migrations' INFO
# lines would bury the report.
logging.getLogger("alembic").setLevel(logging.WARNING)


@dataclass
class Fleet:
    servers: list[AgentServer]
    #: (server, conversation hex, the server's log) per conversation
    logs: list[tuple[AgentServer, str, list[dict[str, Any]]]] = field(default_factory=list)

    @property
    def events(self) -> int:
        return sum(len(log) for _, _, log in self.logs)

    def plans(self, batch: int) -> list[list[tuple[str, list[dict[str, Any]]]]]:
        """Per server, its posts in sending order: each conversation's batches in order, the
        conversations interleaved (they run side by side on a server)."""
        plans = []
        for server in self.servers:
            queues = [
                [(key, log[i : i + batch]) for i in range(0, len(log), batch)]
                for owner, key, log in self.logs
                if owner is server
            ]
            plan = []
            for index in range(max((len(q) for q in queues), default=0)):
                plan += [queue[index] for queue in queues if index < len(queue)]
            plans.append(plan)
        return plans

    def equals_servers(self, store: EventStore) -> bool:
        return all(stored_equals_server(store, server, key) for server, key, _ in self.logs)


@contextlib.contextmanager
def fleet(folder: Path, servers: int, conversations: int, rounds: int) -> Iterator[Fleet]:
    """The agent servers, their conversations run to the end, no webhook configured."""
    llm = ScriptedLLM()
    started: list[AgentServer] = []
    try:
        for number in range(servers):
            name = f"server-{number + 1}"
            started.append(
                start_agent_server(name, folder / name, None, start_timeout=START_TIMEOUT)
            )
        running = [
            (server, server.start_conversation(llm, rounds, condense=index % 2 == 1))
            for index in range(conversations)
            for server in started
        ]
        for server, key in running:
            server.wait_finished(key, timeout=RUN_TIMEOUT)
        yield Fleet(started, [(server, key, server.events(key)) for server, key in running])
    finally:
        for server in started:
            server.stop()
        llm.close()


def _percentiles(seconds: list[float]) -> dict[str, float | None]:
    ordered = sorted(seconds)

    def at(share: float) -> float | None:
        return round(ordered[round(share * (len(ordered) - 1))] * 1e3, 2) if ordered else None

    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 2) if ordered else None,
        "p95_ms": at(0.95),
        "p99_ms": at(0.99),
        "max_ms": at(1.0),
    }


def _in_threads(
    plans: list[list[tuple[str, list[dict[str, Any]]]]],
    send: Callable[[int, str, list[dict[str, Any]]], Any],
) -> tuple[float, list[float], list[Any]]:
    """Each plan from its own thread: wall seconds, every call's latency, every answer."""
    latencies: list[float] = []
    answers: list[Any] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(plans) + 1)

    def worker(index: int) -> None:
        mine: list[float] = []
        got: list[Any] = []
        barrier.wait()
        for key, batch in plans[index]:
            began = time.perf_counter()
            got.append(send(index, key, batch))
            mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)
            answers.extend(got)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(plans))]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began, latencies, answers


def _stored(store: EventStore, found: Fleet) -> int:
    return sum(store.version(key) for _, key, _ in found.logs)


def direct(url: str, found: Fleet, batch: int) -> dict[str, Any]:
    """The same batches appended straight to the store, one thread per server."""
    with EventStore(url) as store:
        store.create_schema()
        versions: dict[str, int] = {}

        def append(index: int, key: str, events: list[dict[str, Any]]) -> int:
            result = store.append(key, events, expected_version=versions.get(key, 0))
            versions[key] = result.version  # a conversation belongs to one thread
            return len(result.appended)

        seconds, latencies, appended = _in_threads(found.plans(batch), append)
        stored = _stored(store, found)
        return {
            "appends": len(latencies),
            "events": stored,
            "appended": sum(appended),
            "seconds": round(seconds, 3),
            "events_per_s": round(stored / seconds, 1),
            **_percentiles(latencies),
            "stored_equals_server": found.equals_servers(store),
        }


def rest_reads(found: Fleet, batch: int) -> dict[str, Any]:
    """The agent servers' share of a post: the page each post makes the ingest read (its
    ``events/search`` from the stored tail, ``limit`` = batch + 1), through the ingest's own
    client, one thread per server, no store."""
    clients = [
        AgentServerClient(Source(server.name, server.url, server.key)) for server in found.servers
    ]
    tails: dict[str, str] = {}

    def read(index: int, key: str, events: list[dict[str, Any]]) -> int:
        tail = tails.get(key)
        page = clients[index].events(key, page_id=tail, limit=len(events) + (tail is not None))
        tails[key] = events[-1]["id"]
        return len(page.items)

    seconds, latencies, sizes = _in_threads(found.plans(batch), read)
    return {
        "pages": len(latencies),
        "events": sum(sizes),
        "seconds": round(seconds, 3),
        "pages_per_s": round(len(latencies) / seconds, 1),
        **_percentiles(latencies),
    }


def in_process(url: str, found: Fleet, batch: int) -> dict[str, Any]:
    """What a post makes the ingest do (``pull``, and the info refresh after a batch with a
    state update), called in this process from one thread per server: the ingest without
    HTTP, uvicorn or JSON parsing."""
    clients = [
        AgentServerClient(Source(server.name, server.url, server.key)) for server in found.servers
    ]
    with EventStore(url) as store:
        store.create_schema()

        def post(index: int, key: str, events: list[dict[str, Any]]) -> int:
            result = pull(store, clients[index], key, wanted_ids(events))
            if changes_state(events):
                _refresh_info(store, clients[index], key)
            return result.appended

        seconds, latencies, appended = _in_threads(found.plans(batch), post)
        stored = _stored(store, found)
        return {
            "posts": len(latencies),
            "events": stored,
            "appended": sum(appended),
            "seconds": round(seconds, 3),
            "events_per_s": round(stored / seconds, 1),
            **_percentiles(latencies),
            "stored_equals_server": found.equals_servers(store),
        }


def ingest(url: str, found: Fleet, batch: int, processes: int, folder: Path) -> dict[str, Any]:
    """The posts through ``processes`` real ``viewstore ingest`` processes on one store."""
    with EventStore(url) as store:
        store.create_schema()
    sources = folder / "sources.toml"
    write_sources(sources, found.servers)
    ingests = [
        Ingest(url, sources, free_port(), folder / f"ingest-{processes}-{number}.log")
        for number in range(processes)
    ]
    names = [server.name for server in found.servers]
    try:
        for process in ingests:
            process.start()

        def post(index: int, key: str, events: list[dict[str, Any]]) -> tuple[int, Any]:
            target = ingests[index % len(ingests)]
            return target.post(f"/events/{key}", events, names[index])

        seconds, latencies, answers = _in_threads(found.plans(batch), post)
    finally:
        for process in ingests:
            process.stop()
    ok = [body for status, body in answers if status == 200]
    with EventStore(url) as store:
        stored = _stored(store, found)
        equal = found.equals_servers(store)
    return {
        "processes": processes,
        "posts": len(answers),
        "ok": len(ok),
        "statuses": sorted({status for status, _ in answers}),
        "events": stored,
        "appended": sum(int(body["appended"]) for body in ok),
        "pulled": sum(int(body["pulled"]) for body in ok),
        "duplicates": sum(int(body["duplicates"]) for body in ok),
        "seconds": round(seconds, 3),
        "events_per_s": round(stored / seconds, 1),
        **_percentiles(latencies),
        "stored_equals_server": equal,
    }


def measure(  # noqa: PLR0917
    server_url: str, servers: int, conversations: int, rounds: int, batch: int, processes: list[int]
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as scratch:
        folder = Path(scratch)
        with fleet(folder, servers, conversations, rounds) as found:
            results: dict[str, Any] = {
                "backend": "postgresql",
                "servers": servers,
                "conversations": len(found.logs),
                "rounds": rounds,
                "batch": batch,
                "events": found.events,
                "posts": sum(len(plan) for plan in found.plans(batch)),
            }
            with scratch_postgres(server_url) as url:
                results["direct"] = direct(url, found, batch)
            results["rest_reads"] = rest_reads(found, batch)
            with scratch_postgres(server_url) as url:
                results["in_process"] = in_process(url, found, batch)
            results["ingest"] = {}
            for count in processes:
                with scratch_postgres(server_url) as url:
                    results["ingest"][str(count)] = ingest(url, found, batch, count, folder)
    rate = results["direct"]["events_per_s"]
    results["ingest_over_direct"] = {
        count: round(figures["events_per_s"] / rate, 3) if rate else None
        for count, figures in results["ingest"].items()
    }
    results["in_process_over_direct"] = (
        round(results["in_process"]["events_per_s"] / rate, 3) if rate else None
    )
    results["stored_equals_server"] = all(
        results[side]["stored_equals_server"] for side in ("direct", "in_process")
    ) and all(figures["stored_equals_server"] for figures in results["ingest"].values())
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"ingest into PostgreSQL: {results['servers']} agent servers, "
        f"{results['conversations']} conversations ({results['rounds']} rounds), "
        f"{results['events']} events, batches of {results['batch']}",
    ]
    one = results["direct"]
    lines.append(
        f"  direct EventStore.append, {results['servers']} threads: "
        f"{one['events_per_s']} events/s; per append p50 {one['p50_ms']} ms, "
        f"p95 {one['p95_ms']} ms, p99 {one['p99_ms']} ms"
    )
    reads = results["rest_reads"]
    lines.append(
        f"  the agent servers' REST page per post alone: {reads['pages_per_s']} pages/s; "
        f"p50 {reads['p50_ms']} ms, p95 {reads['p95_ms']} ms, p99 {reads['p99_ms']} ms"
    )
    pulls = results["in_process"]
    lines.append(
        f"  the ingest's work per post in this process (pull + info refresh, no HTTP): "
        f"{pulls['events_per_s']} events/s ({results['in_process_over_direct']}x direct); "
        f"p50 {pulls['p50_ms']} ms, p95 {pulls['p95_ms']} ms, p99 {pulls['p99_ms']} ms"
    )
    for count, row in results["ingest"].items():
        lines.append(
            f"  viewstore ingest x{count}: {row['events_per_s']} events/s "
            f"({results['ingest_over_direct'][count]}x direct); {row['posts']} posts, "
            f"{row['ok']} answered 200; post to commit p50 {row['p50_ms']} ms, "
            f"p95 {row['p95_ms']} ms, p99 {row['p99_ms']} ms, max {row['max_ms']} ms"
        )
    lines.append(
        f"  every stored conversation equals its server's log: {results['stored_equals_server']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("VIEWSTORE_TEST_POSTGRES_URL"),
        help="a PostgreSQL server: a fresh database per run (default: "
        "$VIEWSTORE_TEST_POSTGRES_URL)",
    )
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=4, help="per agent server")
    parser.add_argument("--rounds", type=int, default=50, help="per conversation")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="events per post")
    parser.add_argument(
        "--ingest-processes", default="1,2", help="comma-separated counts of ingest processes"
    )
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if not args.postgres_url:
        parser.error("needs --postgres-url or VIEWSTORE_TEST_POSTGRES_URL")
    processes = [max(1, int(part)) for part in args.ingest_processes.split(",") if part]
    results = measure(
        args.postgres_url,
        max(1, args.servers),
        max(1, args.conversations),
        max(0, args.rounds),
        max(1, args.batch),
        processes,
    )
    print(report(results), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if results["stored_equals_server"] else 1


if __name__ == "__main__":
    sys.exit(main())
