"""Start-to-exit time of each read command on a small SQLite store, against baselines measured
in the same run: ``python -c pass`` (what no Python command line can beat) and ``viewstore
--version`` (the command line with no store). ``python -c 'import sqlalchemy'`` is shown too:
every command that reads a store imports SQLAlchemy (and, since the read path no longer does,
not pydantic), so no read command can come in under it. The goal is 250 ms or less for every
read command.

Each run is a fresh process, as a user's shell starts it, with bytecode caching on (a user's
shell has it; ``PYTHONDONTWRITEBYTECODE`` is dropped, so the warm-up writes the cache and
the timed runs read it). Runs are interleaved, so a busy moment of a shared machine hits
every command alike; the medians are compared, and the ratios are what carries from one
machine to another.

    .venv/bin/python -m benchmarks.bench_cli_reads [--runs N] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from viewstore import EventStore
from viewstore.demo import run_demo

GOAL_MS = 250.0
SCRIPT = Path(sys.executable).parent / "viewstore"
CONVERSATION = "demo"
BASELINE = "python -c pass"
BASELINES = {
    BASELINE: [sys.executable, "-c", "pass"],
    "viewstore --version": [str(SCRIPT), "--version"],
    "python -c 'import sqlalchemy'": [sys.executable, "-c", "import sqlalchemy"],
}
#: The read commands, each as a user types it.
READS = {
    "viewstore list": ["list"],
    "viewstore view": ["view", CONVERSATION],
    "viewstore events": ["events", CONVERSATION],
    "viewstore indices": ["indices", CONVERSATION],
    "viewstore feed": ["feed"],
    "viewstore stats": ["stats"],
    "viewstore verify": ["verify"],
    "viewstore checkpoint": ["checkpoint"],
    "viewstore export --jsonl -": ["export", CONVERSATION, "-", "--jsonl"],
}


def _environment(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIEWSTORE_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["VIEWSTORE_URL"] = url
    return env


def _once(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return (time.perf_counter() - started) * 1000


def measure(runs: int, folder: Path) -> dict[str, object]:
    url = f"sqlite:///{folder / 'reads.db'}"
    with EventStore(url) as store:
        run_demo(store, CONVERSATION)  # a realistic conversation: 16 events, a condensation
    env = _environment(url)
    commands = {**BASELINES, **{name: [str(SCRIPT), *args] for name, args in READS.items()}}
    for command in commands.values():  # the warm-up: file cache and bytecode cache
        _once(command, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            times[name].append(_once(command, env))
    medians = {name: round(statistics.median(values), 1) for name, values in times.items()}
    baseline = medians[BASELINE]
    slowest = max(medians[name] for name in READS)
    return {
        "runs": runs,
        "median_ms": medians,
        "ratio_to_bare_interpreter": {
            name: round(value / baseline, 2) for name, value in medians.items()
        },
        "goal_ms": GOAL_MS,
        "slowest_read_ms": slowest,
        "reads_within_goal": slowest <= GOAL_MS,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="viewstore read commands, start to exit")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        result = measure(args.runs, Path(folder))
    medians: dict[str, float] = result["median_ms"]  # type: ignore[assignment]
    ratios: dict[str, float] = result["ratio_to_bare_interpreter"]  # type: ignore[assignment]
    width = max(len(name) for name in medians)
    for name, value in medians.items():
        print(f"{name:<{width}} {value:>7.1f} ms  x{ratios[name]:.2f} {BASELINE}")
    verdict = "within" if result["reads_within_goal"] else "OVER"
    print(
        f"slowest read command: {result['slowest_read_ms']} ms, {verdict} the {GOAL_MS:.0f} ms goal"
    )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
