"""An agent worker of tests/migrations/_migrating.py's racing migration, run as a process of its own
(``python -m tests.migrations._migration_workers URL NAME GO STOP OUT``): once the file GO exists,
it appends to conversations of its own and to a shared one, condenses now and then, forks
forks and appends to its forks, until the file STOP exists; then it writes to OUT, as JSON,
how many calls went through and every failure by its type and first line. Each call is the
plain one an agent worker makes (no retry): a failure is one the worker would have seen."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from viewstore import EventStore

from ..store._helpers import A, C, O, U

#: Forks of the store ``_migrating`` fills (tests/migrations/test_migration_0022.py's ``fill``),
#: which the workers fork again at their present.
SOURCES = ("fork1", "fork3", "long")


def work(url: str, name: str, go: Path, stop: Path) -> dict[str, Any]:
    calls, failures = 0, {}
    forks: list[str] = []
    with EventStore(url) as store:
        while not go.exists() and not stop.exists():
            time.sleep(0.01)
        step = 0
        while not stop.exists():
            try:
                _step(store, name, step, forks)
                calls += 1
            except Exception as error:  # counted and reported: the test fails on any
                cause = error.__cause__ or error
                first = str(cause).splitlines()[0] if str(cause) else ""
                what = f"{type(error).__name__}: {error} ({type(cause).__name__}: {first})"
                failures[what] = failures.get(what, 0) + 1
            step += 1
    return {"calls": calls, "failures": failures, "forks": forks}


def _step(store: EventStore, name: str, step: int, forks: list[str]) -> None:
    tag = f"{name}-{step}"
    if step % 10 == 5:  # a fork of a fork (or of the shared one), at its present
        source = (forks or list(SOURCES))[step % len(forks or SOURCES)]
        if step % 20 == 5:
            source = SOURCES[step // 20 % len(SOURCES)]
        fork = store.fork(source, store.version(source), f"{tag}-fork")
        forks.append(fork)
        return
    key = f"{name}-{step % 3}"
    if step % 4 == 0:
        key = "long"
    elif forks and step % 10 == 7:
        key = forks[-1]
    events = [A(f"{tag}-a", f"{tag}-t", f"{tag}-r"), O(f"{tag}-o", f"{tag}-t")]
    if step % 9 == 8:
        events.append(C(f"{tag}-c", [f"{tag}-a", f"{tag}-o"], "condensed", 1))
    elif step % 9 == 3:
        events = [U(f"{tag}-u")]
    store.append(key, events)


def main(argv: list[str]) -> None:
    url, name, go, stop, out = argv
    Path(out).write_text(json.dumps(work(url, name, Path(go), Path(stop))), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
