"""Erasing conversations as ``viewstore prune`` does: one transaction per conversation.

    .venv/bin/python -m benchmarks.bench_prune --url URL [--conversations N] [--events K]

Builds N conversations of K generated events (appended in batches, as an import does), then
erases them one at a time and reports conversations and events erased per second. The
baseline, measured in the same run, is appending the same events.
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path
from typing import Any

from benchmarks.bench_store import build, fresh_events, save, timed
from viewstore import EventStore


def measure(url: str, conversations: int, events: int, seed: int) -> dict[str, Any]:
    store = EventStore(url)
    store.create_schema()
    run = uuid.uuid4().hex[:6]
    keys = [f"prune-{run}-{i}" for i in range(conversations)]
    streams = [fresh_events(events, seed + i) for i in range(conversations)]
    append_s = timed(lambda: [build(store, k, s) for k, s in zip(keys, streams, strict=True)])
    erase_s = timed(lambda: [store.erase(k, reason="benchmark") for k in keys])
    store.close()
    return {
        "conversations": conversations,
        "events_each": events,
        "erase_s": round(erase_s, 3),
        "conversations_per_s": round(conversations / erase_s, 1),
        "events_per_s": round(conversations * events / erase_s),
        "append_s": round(append_s, 3),
        "erase_vs_append": round(erase_s / append_s, 3),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    result = measure(args.url, args.conversations, args.events, args.seed)
    print(
        f"prune: {result['conversations']} conversations of {result['events_each']} events "
        f"erased in {result['erase_s']} s ({result['conversations_per_s']} conversations/s, "
        f"{result['events_per_s']} events/s); appending them took {result['append_s']} s "
        f"(erase/append {result['erase_vs_append']})",
        flush=True,
    )
    save(args.output, result)
    return result


if __name__ == "__main__":
    main()
