"""The viewer's page times on a long conversation (goal: a 20,000-event conversation's page in
under 300 ms of server time).

Each page is requested in-process through Starlette's TestClient (the whole ASGI app:
routing, the store's reads, templating; no network), median of ``--repeat`` runs. Two
conversations of ``--events`` generated OpenHands events: one the condenser kept short (the
realistic case), one never condensed (its whole log is the view). The baseline, measured in the
same run, is the bare ``store.view()`` read of the same conversation.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from benchmarks.bench_store import RESULTS, build, median
from benchmarks.bench_view import generate
from viewstore import EventStore
from viewstore.web import create_app

GOAL_MS = 300.0


def _timed(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return median(samples) * 1e3


def _get(client: TestClient, path: str) -> Callable[[], None]:
    def fetch() -> None:
        answer = client.get(path)
        if answer.status_code != 200:
            raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:200]}")

    return fetch


def measure(url: str, events: int, repeat: int, seed: int) -> dict[str, Any]:
    results: dict[str, Any] = {"events": events, "repeat": repeat, "goal_ms": GOAL_MS}
    with EventStore(url) as store:
        store.create_schema()
        keys = {}
        for name, condense in (("condensed", True), ("uncondensed", False)):
            key = f"web-{name}-{uuid.uuid4().hex[:6]}"
            stream = generate(events, seed, condense=condense)[:events]
            build(store, key, stream)
            keys[name] = key
        with TestClient(create_app(url)) as client:
            for name, key in keys.items():
                version = store.version(key)
                mid = version // 2
                condensations = [c.seq for c in store.condensations(key)]
                pages = {
                    "conversation_now": f"/c/{key}",
                    "conversation_at_mid": f"/c/{key}?seq={mid}",
                    "step_diff_api": f"/api/c/{key}/diff?from={mid}&to={mid + 1}",
                    "log_fragment": f"/c/{key}/log?seq={mid}",
                    "conversation_list": "/",
                }
                if condensations:
                    pages["condensation"] = f"/c/{key}/condensation/{condensations[-1]}"
                baseline = _timed(lambda key=key: store.view(key), repeat)
                row: dict[str, Any] = {
                    "view_length": len(store.view(key).event_ids),
                    "condensations": len(condensations),
                    "baseline_store_view_ms": round(baseline, 2),
                    "pages": {},
                }
                for page, path in pages.items():
                    _get(client, path)()  # warm
                    ms = _timed(_get(client, path), repeat)
                    row["pages"][page] = {
                        "ms": round(ms, 2),
                        "ratio_to_store_view": round(ms / baseline, 2),
                        "met": ms < GOAL_MS,
                    }
                results[name] = row
    return results


def report(results: dict[str, Any], backend: str) -> str:
    lines = [f"viewer page times, {results['events']} events ({backend}), goal < {GOAL_MS} ms"]
    for name in ("condensed", "uncondensed"):
        row = results[name]
        lines.append(
            f"  {name}: view {row['view_length']} events, {row['condensations']} condensations,"
            f" store.view() {row['baseline_store_view_ms']} ms"
        )
        for page, figures in row["pages"].items():
            mark = "ok" if figures["met"] else "OVER"
            lines.append(
                f"    {page:22s} {figures['ms']:8.1f} ms  "
                f"({figures['ratio_to_store_view']}x store.view)  {mark}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results = measure(args.url, args.events, args.repeat, args.seed)
    backend = "postgresql" if args.url.startswith("postgresql") else "sqlite"
    results["backend"] = backend
    print(report(results, backend), flush=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    (args.results_dir / f"web-{backend}.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    main()
