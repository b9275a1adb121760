"""Start-up time of the command line: ``viewstore --help`` against a bare interpreter.

Each run is a fresh process, as a user's shell starts it. The baseline, measured in the same
run and interleaved with it, is ``python -c pass`` with the same interpreter (what no Python
command line can beat); ``import click`` shows what the framework alone costs. The goal is
``viewstore --help`` in 150 ms or less on a developer machine, about 3x the bare interpreter
here. Before the lazy imports it loaded SQLAlchemy, pydantic and rich first (about 450 ms).

    .venv/bin/python -m benchmarks.bench_cli [--runs N] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_MS = 150.0
SCRIPT = Path(sys.executable).parent / "viewstore"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import click'": [sys.executable, "-c", "import click"],
    "viewstore --help": [str(SCRIPT), "--help"],
    "viewstore --version": [str(SCRIPT), "--version"],
}


def _once(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def measure(runs: int) -> dict[str, object]:
    for command in COMMANDS.values():  # warm the file cache once
        _once(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):  # interleaved, so a busy moment hits every command alike
        for name, command in COMMANDS.items():
            times[name].append(_once(command))
    medians = {name: round(statistics.median(values), 1) for name, values in times.items()}
    baseline = medians["python -c pass"]
    return {
        "runs": runs,
        "median_ms": medians,
        "ratio_to_bare_interpreter": {
            name: round(value / baseline, 2) for name, value in medians.items()
        },
        "goal_ms": GOAL_MS,
        "help_within_goal": medians["viewstore --help"] <= GOAL_MS,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="viewstore command-line start-up time")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    result = measure(args.runs)
    for name, value in result["median_ms"].items():  # type: ignore[attr-defined]
        ratio = result["ratio_to_bare_interpreter"][name]  # type: ignore[index]
        print(f"{name:<28} {value:>7.1f} ms  x{ratio:.2f} the bare interpreter")
    verdict = "within" if result["help_within_goal"] else "OVER"
    print(f"viewstore --help: {verdict} the {GOAL_MS:.0f} ms goal")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
