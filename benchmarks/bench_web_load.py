"""The viewer under load: many clients at once on one long conversation's page.

A real ``viewstore serve`` process (uvicorn, as deployed) serves a store holding a
``--events``-event conversation the condenser kept short, and a 16-event one (the demo's size,
the baseline). ``--clients`` threads, each with its own HTTP connection, request the
conversation's page back to back for ``--seconds``; then the same on the short conversation.
Reported per page: requests per second, p50 and p99 latency as the clients saw it, and errors
(any answer but 200, or a failed connection). The ratio long/short says what the long history
costs a loaded server; the absolute figures depend on the machine's cores. Each figure is
measured with one server process and again with ``--workers`` (``viewstore serve
--workers N``): a page's rendering holds a CPU, so processes are how the viewer uses cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from benchmarks.bench_store import build
from benchmarks.bench_view import generate
from viewstore import EventStore
from viewstore.demo import run_demo


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _serve(url: str, port: int, workers: int) -> subprocess.Popen[bytes]:
    viewstore = str(Path(sys.executable).with_name("viewstore"))  # the installed command
    command = [viewstore, "serve", "--url", url, "--port", str(port), "--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    server = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"viewstore serve did not answer: {server.stderr.read().decode()[-500:]}")  # type: ignore[union-attr]


def _load(base: str, path: str, clients: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        nonlocal errors
        mine: list[float] = []
        failed = 0
        with httpx.Client(base_url=base, timeout=60) as http:
            while time.monotonic() < stop:
                start = time.perf_counter()
                try:
                    ok = http.get(path).status_code == 200
                except httpx.HTTPError:
                    ok = False
                if ok:
                    mine.append(time.perf_counter() - start)
                else:
                    failed += 1
        with lock:
            latencies.extend(mine)
            errors += failed

    began = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "errors": errors,
        "requests_per_s": round(len(ordered) / elapsed, 1),
        "p50_ms": round(statistics.median(ordered) * 1e3, 1) if ordered else None,
        "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1e3, 1) if ordered else None,
    }


def _pages(
    url: str, workers: int, clients: int, seconds: float, keys: dict[str, tuple[str, int]]
) -> dict[str, Any]:
    port = _free_port()
    server = _serve(url, port, workers)
    base = f"http://127.0.0.1:{port}"
    try:
        figures: dict[str, Any] = {}
        for name, (key, size) in keys.items():
            _load(base, f"/c/{key}", 2, 1.0)  # warm the server's pools and caches
            figures[name] = {"events": size, **_load(base, f"/c/{key}", clients, seconds)}
    finally:
        server.terminate()
        server.wait(timeout=30)
    short_rate = figures["short"]["requests_per_s"]
    figures["long_over_short_rate"] = (
        round(figures["long"]["requests_per_s"] / short_rate, 2) if short_rate else None
    )
    return figures


def measure(  # noqa: PLR0917
    url: str, events: int, clients: int, seconds: float, seed: int, workers: int
) -> dict[str, Any]:
    with EventStore(url) as store:
        store.create_schema()
        long_key = f"load-{uuid.uuid4().hex[:8]}"
        build(store, long_key, generate(events, seed, condense=True)[:events])
        short_key = run_demo(store, f"demo-{uuid.uuid4().hex[:8]}").conversation_id
        keys = {"long": (long_key, events), "short": (short_key, store.version(short_key))}
        view_length = len(store.view(long_key).event_ids)
    results: dict[str, Any] = {
        "events": events,
        "view_length": view_length,
        "clients": clients,
        "seconds": seconds,
        "processes": {},
    }
    for count in sorted({1, workers}):
        results["processes"][str(count)] = _pages(url, count, clients, seconds, keys)
    one, many = results["processes"]["1"], results["processes"][str(workers)]
    results["workers_over_one_rate"] = (
        round(many["long"]["requests_per_s"] / one["long"]["requests_per_s"], 2)
        if one["long"]["requests_per_s"]
        else None
    )
    return results


def report(results: dict[str, Any], backend: str) -> str:
    lines = [
        f"viewer under load ({backend}): {results['clients']} clients, "
        f"{results['seconds']} s per page, `viewstore serve --workers N`"
    ]
    for count, figures in results["processes"].items():
        for name in ("long", "short"):
            row = figures[name]
            lines.append(
                f"  {count} process(es), {name:5s} conversation ({row['events']} events): "
                f"{row['requests_per_s']} req/s, p50 {row['p50_ms']} ms, "
                f"p99 {row['p99_ms']} ms, {row['errors']} errors"
            )
        lines.append(f"    long/short throughput: {figures['long_over_short_rate']}x")
    lines.append(f"  long page, most processes over one: {results['workers_over_one_rate']}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    results = measure(
        args.url, args.events, args.clients, args.seconds, args.seed, max(args.workers, 1)
    )
    backend = "postgresql" if args.url.startswith("postgresql") else "sqlite"
    results["backend"] = backend
    print(report(results, backend), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
