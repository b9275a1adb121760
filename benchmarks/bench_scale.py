"""One store grown in stages: does each page and each single-conversation operation cost the
same at every size (issue 27)?

    .venv/bin/python -m benchmarks.bench_scale --url URL [--stages 1000,10000,100000]
        [--million] [--repeat N] [--output PATH]

Conversations of ten events each are appended through the public API as workers would (in
transactions of ``--batch`` conversations, ``store.begin()``, to grow the store fast), up to
each stage's count; at each stage every operation is run ``--repeat`` times and its median
reported in milliseconds, then the ratio of the last stage's median to the first's (about 1:
it does not grow with the store). ``--million`` adds a stage of 1,000,000 conversations.

Operations: ``verify`` of one conversation; ``conversations(limit=50)`` by ``updated_at`` and
by ``version``, descending; a keyset page 90% deep in the ``updated_at`` order (``after=``),
and the same page by ``offset`` for comparison (it reads every row it skips); the inactive
scan (``inactive_conversations``, prune's); ``conversation_count()`` (a count: it may grow);
``conversation_count_estimate()`` (the viewer's header: PostgreSQL's estimate above 10,000);
the viewer's list page ``GET /`` and its next page 90% deep (``after=``), in-process through
Starlette's TestClient; ``search``, a page of the conversations whose id contains five
characters of one (a trigram index on PostgreSQL with pg_trgm, else every id: it may grow);
an append of one event to an existing conversation; ``view`` of one conversation.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from benchmarks.bench_store import fresh_events, median, save
from viewstore import ConversationInfo, EventStore
from viewstore.web import create_app

DEFAULT_STAGES = "1000,10000,100000"
EVENTS = 10
#: Operations whose cost may grow with the store (reported, not held to the target).
GROWING = ("offset_page_deep", "conversation_count", "search")


def _key(i: int) -> str:
    return f"scale-{i:08d}"


def _id_cursor(key: str) -> str:
    """A cursor of the order by id just at ``key``: only the id counts in that order."""
    now = datetime.now(UTC)
    return ConversationInfo(key, now, now, 0, 0, False, None).cursor("id")


def grow(
    store: EventStore, start: int, stop: int, events: list[dict[str, Any]], batch: int
) -> float:
    """Append conversations ``start .. stop - 1``; seconds taken. Event ids are unique per
    conversation only, so every conversation may carry the same ten events."""
    began = time.perf_counter()
    for low in range(start, stop, batch):
        with store.begin() as conn:
            for i in range(low, min(low + batch, stop)):
                store.append(_key(i), events, expected_version=0, connection=conn)
    return time.perf_counter() - began


def operations(
    store: EventStore, size: int, before: datetime, rng: random.Random, client: TestClient
) -> dict[str, Callable[[], object]]:
    deep = store.conversations(order_by="id", limit=1, after=_id_cursor(_key(size // 10)))[0]
    deep_cursor = deep.cursor("updated_at", descending=True)
    appended = iter(range(10**9))

    def append_one() -> object:
        key = _key(rng.randrange(size))
        n = next(appended)
        return store.append(key, [{"kind": "MessageEvent", "id": f"late-{size}-{n}"}])

    def page(url: str) -> object:
        answer = client.get(url)
        assert answer.status_code == 200, answer.text[:200]
        return answer

    deep_link = f"/?sort=updated&order=desc&after={deep_cursor}"
    return {
        "verify_one": lambda: store.verify(_key(rng.randrange(size))),
        "catalogue_updated_desc": lambda: store.conversations(
            order_by="updated_at", descending=True, limit=50
        ),
        "catalogue_version_desc": lambda: store.conversations(
            order_by="version", descending=True, limit=50
        ),
        "keyset_page_deep": lambda: store.conversations(
            order_by="updated_at", descending=True, limit=50, after=deep_cursor
        ),
        "offset_page_deep": lambda: store.conversations(
            order_by="updated_at", descending=True, limit=50, offset=size * 9 // 10
        ),
        "inactive_conversations": lambda: store.inactive_conversations(before=before, limit=100),
        "conversation_count": store.conversation_count,
        "count_for_header": store.conversation_count_estimate,
        "viewer_list_page": lambda: page("/"),
        "viewer_next_page_deep": lambda: page(deep_link),
        "search": lambda: store.conversations(search=_key(rng.randrange(size))[-5:], limit=50),
        "append": append_one,
        "view": lambda: store.view(_key(rng.randrange(size))),
    }


def measure(url: str, stages: list[int], repeat: int, batch: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    store = EventStore(url)
    store.create_schema()
    events = fresh_events(EVENTS, seed)
    result: dict[str, Any] = {
        "backend": store.engine.dialect.name,
        "events_each": EVENTS,
        "stages": [],
        "median_ms": {},
    }
    size, before = 0, None
    client = TestClient(create_app(store))
    try:
        for stage in stages:
            if before is None:  # the inactive scan's moment: after the first stage's first half
                grow_s = grow(store, size, stage // 2, events, batch)
                time.sleep(0.01)
                before = datetime.now(UTC)
                grow_s += grow(store, stage // 2, stage, events, batch)
            else:
                grow_s = grow(store, size, stage, events, batch)
            size = stage
            medians = {}
            for name, fn in operations(store, size, before, rng, client).items():
                fn()  # warm: the first call pays for connections and plans
                samples = []
                for _ in range(repeat):
                    start = time.perf_counter()
                    fn()
                    samples.append(time.perf_counter() - start)
                medians[name] = round(median(samples) * 1000, 2)
                result["median_ms"].setdefault(name, []).append(medians[name])
            result["stages"].append(
                {"conversations": stage, "grow_s": round(grow_s, 1), "median_ms": medians}
            )
            print(
                f"  {stage:>9,} conversations (grown in {grow_s:.1f} s): "
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
    lines = [
        f"| operation ({result['backend']}, ms) | " + " | ".join(sizes) + " | last/first |",
        "|---" * (len(sizes) + 2) + "|",
    ]
    for name, values in result["median_ms"].items():
        note = " (may grow)" if name in GROWING else ""
        lines.append(
            f"| {name}{note} | "
            + " | ".join(f"{v}" for v in values)
            + f" | {result['ratio_last_first'][name]} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--stages", default=DEFAULT_STAGES, help="conversation counts, ascending")
    parser.add_argument("--million", action="store_true", help="add a stage of 1,000,000")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--batch", type=int, default=500, help="conversations per transaction")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    stages = [int(value) for value in args.stages.split(",") if value.strip()]
    if args.million and 1_000_000 not in stages:
        stages.append(1_000_000)
    if not stages or stages != sorted(set(stages)) or stages[0] < 20:
        parser.error("--stages: ascending conversation counts, the first at least 20")
    print(f"scale: stages {', '.join(f'{s:,}' for s in stages)}", flush=True)
    result = measure(args.url, stages, args.repeat, args.batch, args.seed)
    print(table(result), flush=True)
    save(args.output, result)
    return result


if __name__ == "__main__":
    main()
