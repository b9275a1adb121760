"""Benchmark of the pure view engine.

    python -m benchmarks.bench_view [--events N] [--repeat R] [--block B] [--seed S]

It generates a realistic OpenHands stream (~1 KiB events: a system prompt, user and agent
messages, batches of 1-3 tool calls sharing an ``llm_response_id`` with thinking on the first
action now and then, observations in and out of order, agent errors, rejections, state updates
and token events, and periodic condensations made like the real ``LLMSummarizingCondenser`` from
the live manipulation indices, docs/semantics.md §11) and measures:

* the cost of one ``View.append_event`` at a history of ~100 events and at ~N events (median
  over repetitions of ``perf_counter_ns`` around a block of appends of the same pre-parsed
  events), and their ratio: appends must not slow down as the history grows (target <= 1.15);
* ``View.from_events`` over N events (the resume path, with enforcement);
* one condensation appended to a view of N/2 events;
* ``parse_event`` alone, so that parsing cost never hides in the numbers above.

It prints a table and writes ``benchmarks/results/view.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from viewstore.domain.events import Event, parse_event
from viewstore.domain.view import View

RESULTS = Path(__file__).resolve().parent / "results" / "view.json"
TARGET_RATIO = 1.15
SMALL_HISTORY = 100

_WORDS = (
    "the", "loader", "fails", "on", "empty", "config", "files", "so", "we", "check", "path",
    "before", "opening", "it", "and", "add", "a", "regression", "test", "then", "run", "suite",
    "again", "with", "coverage", "to", "make", "sure", "nothing", "else", "broke",
)  # fmt: skip


def _text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


class StreamGenerator:
    """Realistic event dicts; with ``condense`` it runs a condenser on the live view."""

    def __init__(
        self, seed: int, *, condense: bool, max_size: int = 120, text_scale: float = 1.0
    ) -> None:
        self.rng = random.Random(seed)
        self.text_scale = text_scale
        self.condense = condense
        self.max_size = max_size
        self.view = View()
        self.count = 0
        self.responses = 0
        self.calls = 0
        self.head: str | None = None

    # -- plumbing ----------------------------------------------------------------------

    def _text(self, chars: int) -> str:
        return _text(self.rng, int(chars * self.text_scale))

    def _id(self) -> str:
        self.count += 1
        return f"00000000-0000-4000-8000-{self.count:012d}"

    def _stamp(self, raw: dict[str, Any]) -> dict[str, Any]:
        # The SDK's field order: id, timestamp, source, parent_id, ..., kind last.
        out: dict[str, Any] = {
            "id": raw.pop("id"),
            "timestamp": f"2025-06-11T19:{self.count // 60 % 60:02d}:{self.count % 60:02d}.000000",
            "source": raw.pop("source"),
        }
        if self.head is not None:
            out["parent_id"] = self.head
        kind = raw.pop("kind")
        out.update(raw)
        out["kind"] = kind
        if kind != "ConversationStateUpdateEvent":
            self.head = out["id"]
        return out

    def _emit(self, raw: dict[str, Any]) -> dict[str, Any]:
        event = self._stamp(raw)
        if self.condense:
            self.view.append_event(parse_event(event))
        return event

    # -- event shapes --------------------------------------------------------------------

    def _message(self, source: str, chars: int) -> dict[str, Any]:
        role = "user" if source == "user" else "assistant"
        content = [{"cache_prompt": False, "type": "text", "text": self._text(chars)}]
        return self._emit(
            {
                "id": self._id(),
                "source": source,
                "llm_message": {"role": role, "content": content, "thinking_blocks": []},
                "activated_skills": [],
                "extended_content": [],
                "kind": "MessageEvent",
            }
        )

    def _action(self, response: str, thinking: bool) -> tuple[str, dict[str, Any]]:
        self.calls += 1
        tc = f"toolu_{self.calls:06d}"
        command = self._text(60)
        blocks = (
            [{"type": "thinking", "thinking": self._text(400), "signature": "EqQBCkYIAxgC"}]
            if thinking
            else []
        )
        event = self._emit(
            {
                "id": self._id(),
                "source": "agent",
                "thought": [{"cache_prompt": False, "type": "text", "text": self._text(200)}]
                if thinking
                else [],
                "thinking_blocks": blocks,
                "action": {"command": command, "kind": "TerminalAction"},
                "tool_name": "terminal",
                "tool_call_id": tc,
                "tool_call": {
                    "id": tc,
                    "name": "terminal",
                    "arguments": json.dumps({"command": command}),
                    "origin": "completion",
                },
                "llm_response_id": response,
                "security_risk": "LOW",
                "summary": f"terminal: {command[:40]}",
                "kind": "ActionEvent",
            }
        )
        return tc, event

    def _observation(self, tc: str, action_id: str) -> dict[str, Any]:
        roll = self.rng.random()
        if roll < 0.03:
            return self._emit(
                {
                    "id": self._id(),
                    "source": "agent",
                    "tool_name": "terminal",
                    "tool_call_id": tc,
                    "error": "Tool execution timed out after 120s. " + self._text(300),
                    "kind": "AgentErrorEvent",
                }
            )
        if roll < 0.05:
            return self._emit(
                {
                    "id": self._id(),
                    "source": "environment",
                    "tool_name": "terminal",
                    "tool_call_id": tc,
                    "rejection_reason": "User rejected the action",
                    "rejection_source": "user",
                    "action_id": action_id,
                    "kind": "UserRejectObservation",
                }
            )
        output = self._text(self.rng.randint(600, 1800))
        return self._emit(
            {
                "id": self._id(),
                "source": "environment",
                "tool_name": "terminal",
                "tool_call_id": tc,
                "observation": {
                    "content": [{"cache_prompt": False, "type": "text", "text": output}],
                    "is_error": False,
                    "command": "pytest -x -q",
                    "exit_code": 0,
                    "kind": "TerminalObservation",
                },
                "action_id": action_id,
                "kind": "ObservationEvent",
            }
        )

    def _non_llm(self) -> dict[str, Any]:
        if self.rng.random() < 0.5:
            return self._emit(
                {
                    "id": self._id(),
                    "source": "environment",
                    "key": "execution_status",
                    "value": "running",
                    "kind": "ConversationStateUpdateEvent",
                }
            )
        return self._emit(
            {
                "id": self._id(),
                "source": "agent",
                "prompt_token_ids": [],
                "response_token_ids": [self.rng.randint(0, 50000) for _ in range(40)],
                "kind": "TokenEvent",
            }
        )

    # -- the condenser (docs/semantics.md §11) ------------------------------------------------

    def _maybe_condense(self) -> Iterator[dict[str, Any]]:
        view = self.view.events
        if not self.condense or len(view) <= self.max_size:
            return
        keep_first = 2
        tail = self.max_size // 2 - keep_first - 1
        system = next((i for i, e in enumerate(view) if e.kind == "SystemPromptEvent"), -1)
        indices = self.view.manipulation_indices
        try:
            start = indices.find_next(max(keep_first, system + 1))
            end = indices.find_next(len(view) - tail)
        except ValueError:
            return  # soft requirement: leave the view as is
        if end - start < 0.1 * len(view):
            return
        yield self._emit(
            {
                "id": self._id(),
                "source": "environment",
                "forgotten_event_ids": [e.id for e in view[start:end]],
                "summary": self._text(800),
                "summary_offset": start,
                "llm_response_id": f"resp_condenser_{self.count}",
                "kind": "Condensation",
            }
        )

    # -- a conversation ------------------------------------------------------------------

    def _step(self) -> Iterator[dict[str, Any]]:
        """One agent step: an LLM response with 1-3 tool calls and their results."""
        self.responses += 1
        response = f"resp_{self.responses:06d}"
        thinking = self.rng.random() < 0.3
        size = self.rng.choice((1, 1, 1, 2, 3))
        actions = [self._action(response, thinking and i == 0) for i in range(size)]
        yield from (event for _, event in actions)
        if self.rng.random() < 0.1:
            yield self._non_llm()
        results = list(actions)
        if len(results) > 1 and self.rng.random() < 0.3:
            results.reverse()
        for tc, action in results:
            yield self._observation(tc, action["id"])
        if self.rng.random() < 0.15:
            yield self._non_llm()

    def turns(self) -> Iterator[list[dict[str, Any]]]:
        """Complete turns (no tool call left pending at a turn boundary)."""
        yield [
            self._emit(
                {
                    "id": self._id(),
                    "source": "agent",
                    "system_prompt": {"type": "text", "text": self._text(3000)},
                    "tools": [],
                    "kind": "SystemPromptEvent",
                }
            ),
            self._message("user", 300),
        ]
        while True:
            turn: list[dict[str, Any]] = []
            for _ in range(self.rng.randint(2, 8)):
                turn += self._maybe_condense()
                turn += self._step()
            turn.append(self._message("agent", 400))
            if self.rng.random() < 0.05:
                request = {"id": self._id(), "source": "user", "kind": "CondensationRequest"}
                turn.append(self._emit(request))
            turn.append(self._message("user", 250))
            yield turn


def generate(
    n: int, seed: int, *, condense: bool, max_size: int = 120, text_scale: float = 1.0
) -> list[dict[str, Any]]:
    """At least ``n`` events, cut at a turn boundary."""
    events: list[dict[str, Any]] = []
    stream = StreamGenerator(seed, condense=condense, max_size=max_size, text_scale=text_scale)
    for turn in stream.turns():
        events += turn
        if len(events) >= n:
            return events
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- measurements


def _fold(events: list[Event]) -> View:
    view = View()
    for event in events:
        view.append_event(event)
    return view


def _append_block_ns(
    bases: list[list[Event]], block: list[Event], repeat: int
) -> list[list[float]]:
    """Per-append ns of ``block`` appended to a view holding each base, ``repeat`` times.

    The bases take turns within each repetition, so drift in the machine's load (this runs on
    shared hardware) hits every history length alike instead of biasing the ratio.
    """
    samples: list[list[float]] = [[] for _ in bases]
    for _ in range(repeat):
        for base, out in zip(bases, samples, strict=True):
            view = _fold(base)
            append = view.append_event
            start = time.perf_counter_ns()
            for event in block:
                append(event)
            out.append((time.perf_counter_ns() - start) / len(block))
    return samples


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _history(turns_source: list[dict[str, Any]], length: int) -> int:
    """The smallest turn boundary at or after ``length`` in a condensation-free stream."""
    n = 0
    for turn_end in _turn_ends(turns_source):
        n = turn_end
        if n >= length:
            break
    return n


def _turn_ends(events: list[dict[str, Any]]) -> Iterator[int]:
    for i, event in enumerate(events):
        if event["kind"] == "MessageEvent" and event["source"] == "user":
            yield i + 1


def measure_append(n: int, seed: int, repeat: int, block_size: int) -> dict[str, Any]:
    raw = generate(n + 4 * block_size, seed, condense=False)
    events = [parse_event(e) for e in raw]
    small = _history(raw, SMALL_HISTORY)
    large = _history(raw, n)
    # The same pre-parsed block is appended at both history lengths; its ids are fresh, so
    # the two views are valid OpenHands views either way (ids need not be unique anyway).
    block_raw = generate(large + block_size, seed + 1, condense=False)[large : large + block_size]
    block = [parse_event({**e, "id": f"block-{i:06d}"}) for i, e in enumerate(block_raw)]
    block = [e for e in block if e.kind != "Condensation"]
    small_ns, large_ns = _append_block_ns([events[:small], events[:large]], block, repeat)
    ratio = statistics.median(large_ns) / statistics.median(small_ns)
    return {
        "history_small": small,
        "history_large": large,
        "block": len(block),
        "repeat": repeat,
        "append_ns_small": statistics.median(small_ns),
        "append_ns_large": statistics.median(large_ns),
        "append_ns_small_samples": small_ns,
        "append_ns_large_samples": large_ns,
        "ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "ok": ratio <= TARGET_RATIO,
    }


def measure_from_events(n: int, seed: int, repeat: int) -> dict[str, Any]:
    raw = generate(n, seed, condense=True)[:n]
    lines = [json.dumps(e, separators=(",", ":")).encode("utf-8") for e in raw]
    parse_s = _median_time(lambda: [parse_event(line) for line in lines], repeat)
    events = [parse_event(line) for line in lines]
    from_events_s = _median_time(lambda: View.from_events(events), repeat)
    view = View.from_events(events)
    live = _fold(events)
    return {
        "events": len(events),
        "bytes": sum(len(line) for line in lines),
        "mean_event_bytes": sum(len(line) for line in lines) / len(lines),
        "condensations": sum(e.kind == "Condensation" for e in events),
        "requests": sum(e.kind == "CondensationRequest" for e in events),
        "live_view_length": len(live),
        "from_events_view_length": len(view),
        "enforcement_rounds": len(view.enforcement_rounds),
        "parse_s": parse_s,
        "parse_events_per_s": len(events) / parse_s,
        "from_events_s": from_events_s,
        "from_events_events_per_s": len(events) / from_events_s,
    }


def measure_condensation(n: int, seed: int, repeat: int) -> dict[str, Any]:
    """One condenser-made condensation on a live view of ``n`` events: forget from the head
    (after the system prompt and first message) to the middle, summary in its place."""
    raw = generate(2 * n, seed, condense=False)
    events: list[Event] = []
    base = View()
    for event in (parse_event(e) for e in raw):
        if len(base) >= n:
            break
        events.append(event)
        base.append_event(event)
    view = base.events
    indices = base.manipulation_indices
    start = indices.find_next(2)
    end = indices.find_next(len(view) // 2)
    condensation = parse_event(
        {
            "id": "bench-condensation",
            "source": "environment",
            "forgotten_event_ids": [e.id for e in view[start:end]],
            "summary": _text(random.Random(seed), 800),
            "summary_offset": start,
            "kind": "Condensation",
        }
    )
    samples = []
    for _ in range(repeat):
        target = _fold(events)
        t0 = time.perf_counter()
        target.append_event(condensation)
        samples.append(time.perf_counter() - t0)
    return {
        "view_length": len(view),
        "forgotten": end - start,
        "after_length": len(view) - (end - start) + 1,
        "condensation_s": statistics.median(samples),
        "repeat": repeat,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=20_000, help="large history / stream size")
    parser.add_argument("--repeat", type=int, default=15, help="repetitions per measurement")
    parser.add_argument("--block", type=int, default=1000, help="appends timed per repetition")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    append = measure_append(args.events, args.seed, args.repeat, args.block)
    resume = measure_from_events(args.events, args.seed, max(3, args.repeat // 3))
    condensation = measure_condensation(args.events // 2, args.seed, max(3, args.repeat // 3))

    rows = [
        (f"append_event @ {append['history_small']} events", f"{append['append_ns_small']:.0f} ns"),
        (f"append_event @ {append['history_large']} events", f"{append['append_ns_large']:.0f} ns"),
        (
            "ratio large / small",
            f"{append['ratio']:.3f} ({'ok' if append['ok'] else 'OVER'} <= {TARGET_RATIO})",
        ),
        (
            f"parse_event x {resume['events']} ({resume['mean_event_bytes']:.0f} B avg)",
            f"{resume['parse_s']:.3f} s ({resume['parse_events_per_s']:,.0f} ev/s)",
        ),
        (
            f"View.from_events x {resume['events']} ({resume['condensations']} condensations)",
            f"{resume['from_events_s']:.3f} s ({resume['from_events_events_per_s']:,.0f} ev/s)",
        ),
        (
            f"condensation on {condensation['view_length']} events "
            f"(forgets {condensation['forgotten']})",
            f"{condensation['condensation_s'] * 1000:.2f} ms",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measurement':<{width}}  result")
    print(f"{'-' * width}  {'-' * 36}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")

    result = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "args": {k: str(v) for k, v in vars(args).items()},
        "append": append,
        "from_events": resume,
        "condensation": condensation,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten to {args.output}")
    return 0 if append["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
