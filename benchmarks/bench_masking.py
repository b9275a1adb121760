"""Masking before storing (viewstore/domain/masking.py): what scanning every appended event for
secrets costs an append, against the same appends into a store without masking rules.

    python -m benchmarks.bench_masking --url URL [--events N] [--conversations K] [--block B]
        [--text-scale S] [--output PATH]

**Events.** ``--conversations`` realistic OpenHands streams (``bench_view.generate``, no
condensation, texts at ``bench_footprint.TEXT_SCALE`` unless ``--text-scale`` says otherwise:
payloads of about 600 bytes), ``--events`` events in all. The first two events of each
conversation (its system prompt and first message) are appended before the clock starts, so
every timed append finds its conversation's tail and may take the fast path.

**Arms.** Each arm has a fresh store of its own (a file beside ``--url``'s on SQLite, a schema
on PostgreSQL) and appends the same events, one event per append, the conversations round-robin:

* ``none``: no masking rules;
* ``common-clean``: ``use = ["common"]`` (the six built-in credential rules), no event matches:
  the cost of the scan alone, the usual case;
* ``common-1pct`` and ``common-10pct``: the same rules, with an OpenAI-style key
  (``sk-proj-`` and 30 letters and digits) put into the text of 1% and 10% of the events (tool
  outputs and messages, picked at random): those are masked, take the ordinary append path and
  write a ``masks`` row.

The arms take turns in blocks of ``--block`` appends, the order rotating every block, so the
machine's drift weighs on every arm alike. Each append is timed on its own (median, 95th
percentile); events per second is a block's appends over its time, which on SQLite ends with a
checkpoint of the WAL (``bench_store.checkpoint``), so each arm pays for the pages it wrote.
The ratio is an arm's median append against ``none``'s; the appends that masked a key have a
median of their own. ``rules.mask(event)`` alone, without a database, is timed too: over
every event of the streams (clean) and over the events holding a key (masked), in microseconds
per event. Each arm's ``masks`` rows are counted after the run and its store verified.
"""

from __future__ import annotations

import argparse
import copy
import platform
import random
import string
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from benchmarks.bench_footprint import TEXT_SCALE
from benchmarks.bench_store import checkpoint, median, save
from benchmarks.bench_view import generate
from viewstore import EventStore, MaskingRules, parse_event
from viewstore.domain.events import Event

#: Appended before the clock starts: the first append of a conversation creates it, on the
#: ordinary path whatever the rules.
WARM = 2
RULES = 'use = ["common"]'
#: Each arm: whether it masks, and the share of its events that carry a key.
ARMS: dict[str, tuple[bool, float]] = {
    "none": (False, 0.0),
    "common-clean": (True, 0.0),
    "common-1pct": (True, 0.01),
    "common-10pct": (True, 0.10),
}
_KEY_CHARS = string.ascii_letters + string.digits


#: Where a key goes, by kind: the first text block of a tool's output or of a message.
_TEXT_AT = {"ObservationEvent": "observation", "MessageEvent": "llm_message"}


def _text_field(event: dict[str, Any]) -> dict[str, Any] | None:
    """The content block whose text a key goes into, if the event has one."""
    outer = _TEXT_AT.get(event["kind"])
    return None if outer is None else cast("dict[str, Any]", event[outer]["content"][0])


def _with_key(event: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A copy of ``event`` with a key in the middle of its text, where an agent's ``env`` or
    a pasted config would leave one."""
    out = copy.deepcopy(event)
    block = _text_field(out)
    assert block is not None
    text = block["text"]
    cut = text.find(" ", len(text) // 2)
    cut = len(text) if cut < 0 else cut
    key = "sk-proj-" + "".join(rng.choices(_KEY_CHARS, k=30))
    block["text"] = f"{text[:cut]} OPENAI_API_KEY={key}{text[cut:]}"
    return out


def streams(
    events: int, conversations: int, seed: int, text_scale: float = TEXT_SCALE
) -> list[list[dict[str, Any]]]:
    per = max(WARM + 1, events // conversations)
    return [
        generate(per, seed + c, condense=False, text_scale=text_scale)[:per]
        for c in range(conversations)
    ]


def keyed(
    base: list[list[dict[str, Any]]], share: float, seed: int
) -> tuple[list[list[dict[str, Any]]], set[tuple[int, int]]]:
    """``base`` with a key in ``share`` of its timed events (at least one when ``share`` is not
    0), and where: (conversation, index) pairs."""
    timed = sum(len(stream) - WARM for stream in base)
    eligible = [
        (c, i)
        for c, stream in enumerate(base)
        for i in range(WARM, len(stream))
        if _text_field(stream[i]) is not None
    ]
    count = min(len(eligible), max(1, round(share * timed))) if share else 0
    rng = random.Random(seed)
    chosen = set(rng.sample(eligible, count))
    out = [list(stream) for stream in base]
    for c, i in sorted(chosen):
        out[c][i] = _with_key(base[c][i], rng)
    return out, chosen


def _store_for(
    url: str, arm: str, masking: MaskingRules | None
) -> tuple[EventStore, Callable[[], None]]:
    """A fresh store for ``arm``: a new file beside ``url``'s (SQLite) or a new schema
    (PostgreSQL), and what drops it."""
    if url.startswith("sqlite"):
        path = Path(url.split("///", 1)[1]).with_name(f"masking-{arm}.db")
        for stale in path.parent.glob(path.name + "*"):
            stale.unlink()

        def remove() -> None:
            for written in path.parent.glob(path.name + "*"):
                written.unlink()

        return EventStore(f"sqlite:///{path}", masking=masking), remove
    schema = f"bench_masking_{arm.replace('-', '_')}"
    with EventStore(url) as setup, setup.engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')

    def drop() -> None:
        with EventStore(url) as again, again.engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return EventStore(url, schema=schema, masking=masking), drop


@dataclass
class Arm:
    name: str
    store: EventStore
    drop: Callable[[], None]
    events: list[list[dict[str, Any]]]
    keyed: set[tuple[int, int]]
    samples: list[float] = field(default_factory=list)
    keyed_samples: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def run_block(self, keys: list[str], chunk: list[tuple[int, int]]) -> None:
        append = self.store.append
        started = time.perf_counter()
        for c, i in chunk:
            before = time.perf_counter()
            append(keys[c], [self.events[c][i]])
            took = time.perf_counter() - before
            self.samples.append(took)
            if (c, i) in self.keyed:
                self.keyed_samples.append(took)
        checkpoint(self.store)
        self.seconds += time.perf_counter() - started


def _quantile(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, int(len(samples) * q))]


def _figures(arm: Arm, keys: list[str], baseline: float) -> dict[str, Any]:
    rows = sum(len(arm.store.masks(key)) for key in keys)
    report = arm.store.verify()
    assert report.ok, report.problems
    return {
        "appends": len(arm.samples),
        "events_per_s": len(arm.samples) / arm.seconds,
        "median_ms": median(arm.samples) * 1e3,
        "p95_ms": _quantile(arm.samples, 0.95) * 1e3,
        "ratio_to_none": median(arm.samples) / baseline,
        "events_with_key": len(arm.keyed),
        "masks_rows": rows,
        # The appends that masked a key: the ordinary path and a record.
        "keyed_median_ms": median(arm.keyed_samples) * 1e3 if arm.keyed_samples else None,
    }


def measure_appends(
    url: str, base: list[list[dict[str, Any]]], block: int, seed: int
) -> dict[str, Any]:
    rules = MaskingRules.from_toml(RULES)
    keys = [f"masking-{c:03d}" for c in range(len(base))]
    arms: list[Arm] = []
    try:
        for n, (name, (masks, share)) in enumerate(ARMS.items()):
            events, where = keyed(base, share, seed + 100 * n)
            store, drop = _store_for(url, name, rules if masks else None)
            arms.append(Arm(name, store, drop, events, where))
            store.create_schema()
        for arm in arms:
            for c, key in enumerate(keys):
                for i in range(WARM):
                    arm.store.append(key, [arm.events[c][i]])
            checkpoint(arm.store)
        longest = max(len(stream) for stream in base)
        order = [(c, i) for i in range(WARM, longest) for c in range(len(base)) if i < len(base[c])]
        for b, start in enumerate(range(0, len(order), block)):
            chunk = order[start : start + block]
            turn = b % len(arms)
            for arm in arms[turn:] + arms[:turn]:
                arm.run_block(keys, chunk)
        baseline = median(arms[0].samples)
        return {arm.name: _figures(arm, keys, baseline) for arm in arms}
    finally:
        for arm in arms:
            arm.store.close()
            arm.drop()


def _mask_us(rules: MaskingRules, events: list[Event], repeat: int) -> float:
    """Microseconds per ``rules.mask(event)`` over ``events``: the median of ``repeat`` passes."""
    mask = rules.mask
    passes = []
    for _ in range(repeat):
        started = time.perf_counter()
        for event in events:
            mask(event)
        passes.append((time.perf_counter() - started) / len(events))
    return median(passes) * 1e6


def measure_mask(base: list[list[dict[str, Any]]], repeat: int, seed: int) -> dict[str, Any]:
    rules = MaskingRules.from_toml(RULES)
    clean = [parse_event(event) for stream in base for event in stream]
    events, where = keyed(base, ARMS["common-10pct"][1], seed)
    masked = [parse_event(events[c][i]) for c, i in sorted(where)]
    assert all(rules.mask(event)[1] for event in masked)
    assert not any(rules.mask(event)[1] for event in clean)
    return {
        "clean_events": len(clean),
        "clean_us": _mask_us(rules, clean, repeat),
        "masked_events": len(masked),
        "masked_us": _mask_us(rules, masked, repeat),
        "payload_bytes_mean": sum(len(e.payload_json.encode()) for e in clean) / len(clean),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    with EventStore(args.url) as probe:
        backend = probe.engine.dialect.name
    base = streams(args.events, args.conversations, args.seed, args.text_scale)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "backend": backend,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "events": sum(len(stream) for stream in base),
        "conversations": len(base),
        "block": args.block,
        "text_scale": args.text_scale,
        "rules": RULES,
    }
    print("... rules.mask alone", file=sys.stderr, flush=True)
    results["mask"] = measure_mask(base, args.mask_repeat, args.seed + 1000)
    print(f"... one-event appends, arms {', '.join(ARMS)}", file=sys.stderr, flush=True)
    results["arms"] = measure_appends(args.url, base, args.block, args.seed + 1000)
    return results


def report(results: dict[str, Any]) -> str:
    m = results["mask"]
    lines = [
        f"masking before storing ({results['backend']}): {results['events']} events of "
        f"{m['payload_bytes_mean']:.0f} B on average, {results['conversations']} conversations,"
        " one event per append",
        f"  {'arm':<14} {'events/s':>9} {'median ms':>10} {'p95 ms':>8} {'vs none':>8} "
        f"{'keys':>5} {'records':>8} {'keyed ms':>9}",
    ]
    for name, r in results["arms"].items():
        keyed_ms = "-" if r["keyed_median_ms"] is None else f"{r['keyed_median_ms']:.3f}"
        lines.append(
            f"  {name:<14} {r['events_per_s']:>9.0f} {r['median_ms']:>10.3f} {r['p95_ms']:>8.3f}"
            f" {r['ratio_to_none']:>7.2f}x {r['events_with_key']:>5} {r['masks_rows']:>8}"
            f" {keyed_ms:>9}"
        )
    lines.append(
        f"  rules.mask(event) alone: {m['clean_us']:.1f} us clean ({m['clean_events']} events), "
        f"{m['masked_us']:.1f} us with a key ({m['masked_events']} events)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--events", type=int, default=6000, help="events in all, per arm")
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--block", type=int, default=50, help="appends per arm in a turn")
    parser.add_argument("--mask-repeat", type=int, default=5, help="passes of rules.mask")
    parser.add_argument("--seed", type=int, default=31)
    # The scan's cost grows with the text: 1.0 gives the generator's full tool outputs.
    parser.add_argument("--text-scale", type=float, default=TEXT_SCALE)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    print(report(results))
    save(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
