"""Code run in worker processes (spawn context): each builds its own EventStore from the URL.

Kept in its own module so the spawned interpreter imports only this and viewstore.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from viewstore import ConcurrencyError, EventStore, StoredView, append_with_retry
from viewstore.store import event_store

from ._helpers import condensation, message

VIEW_CAP = 12  # condense when the view holds this many events: keeps reads small
KEEP = 4


def _decide_for(eid: str) -> Any:
    """The decision of one step: a message, preceded by a condensation when the view is long.

    Every event records the seq it was decided for (``at``): a stale decision that slipped
    through would be stored at another seq, which the test checks.
    """

    def decide(view: StoredView | None) -> list[dict[str, Any]]:
        version = 0 if view is None else view.version
        batch: list[dict[str, Any]] = []
        if view is not None and len(view.events) >= VIEW_CAP:
            old = [e.id for e in view.events][:-KEEP]  # the previous summary too
            batch.append(
                condensation(f"{eid}-c", old, summary=f"before {version}", offset=0, at=version + 1)
            )
        batch.append(message(eid, at=version + len(batch) + 1))
        return batch

    return decide


def concurrency_worker(url: str, worker: int, steps: int, shared: list[str]) -> dict[str, Any]:
    """``steps`` read-decide-append steps, alternating shared and own conversations."""
    conflicts = 0
    errors: list[str] = []
    done: list[tuple[str, str]] = []

    def count(_error: ConcurrencyError, _attempt: int) -> None:
        nonlocal conflicts
        conflicts += 1

    with EventStore(url) as store:
        for i in range(steps):
            conv = shared[(i // 2) % len(shared)] if i % 2 == 0 else f"own-{worker}"
            eid = f"w{worker}-{i}"
            try:
                append_with_retry(
                    store,
                    conv,
                    _decide_for(eid),
                    attempts=500,
                    backoff=0.001,
                    max_backoff=0.02,
                    on_conflict=count,
                )
                done.append((conv, eid))
            except Exception as error:  # every error is reported to the test, which fails
                errors.append(f"{conv}/{eid}: {type(error).__name__}: {error}")
    return {"worker": worker, "conflicts": conflicts, "errors": errors, "done": done}


def feed_writer(
    url: str, worker: int, steps: int, conversations: list[str], late: tuple[int, float]
) -> dict[str, Any]:
    """Append ``steps`` events; with ``late = (every, hold)``, every ``every``-th append holds
    its transaction open for ``hold`` seconds just before commit (a late committer)."""
    late_every, hold = late
    holding = {"now": False}

    def hook(point: str) -> None:
        if point == "before_commit" and holding["now"]:
            time.sleep(hold)

    event_store.append_hook = hook
    errors: list[str] = []
    conflicts = 0
    held = 0

    def count(_error: ConcurrencyError, _attempt: int) -> None:
        nonlocal conflicts
        conflicts += 1

    with EventStore(url) as store:
        for i in range(steps):
            holding["now"] = late_every > 0 and i % late_every == late_every - 1
            held += holding["now"]
            conv = conversations[i % len(conversations)]
            eid = f"f{worker}-{i}"
            try:
                append_with_retry(
                    store,
                    conv,
                    lambda _view, eid=eid: [message(eid)],
                    attempts=500,
                    backoff=0.001,
                    max_backoff=0.02,
                    on_conflict=count,
                )
            except Exception as error:
                errors.append(f"{conv}/{eid}: {type(error).__name__}: {error}")
    return {"worker": worker, "errors": errors, "conflicts": conflicts, "held": held}


def crash_writer(url: str, conversation: str, point: str, ready: str, expected: int) -> None:
    """Start an append, signal readiness at ``point`` (inside the transaction), and hang there
    until the parent kills this process."""

    def hook(at: str) -> None:
        if at == point:
            # Whole or not at all: the parent reads the file as soon as it exists (a plain
            # write_text let it read '' once, on a loaded machine).
            Path(ready + ".tmp").write_text(point)
            os.replace(ready + ".tmp", ready)
            time.sleep(600)

    event_store.append_hook = hook
    store = EventStore(url)
    store.append(
        conversation,
        [
            message("killed-1"),
            condensation("killed-2", ["m1"], summary="gone", offset=0),
            message("killed-3"),
        ],
        expected_version=expected,
    )
    raise SystemExit("the append returned: the crash point was never reached")


def fast_writer(url: str, conversation: str, ready: str) -> None:
    """Append one message at a time, forever (the fast path after the first), noting each
    committed seq in ``ready``, until the parent kills this process at a random moment."""
    store = EventStore(url)
    version = store.version(conversation)
    while True:
        version = store.append(conversation, message(f"fast-{version + 1}")).version
        # Replaced whole, so a kill mid-write never leaves the parent an empty file.
        Path(ready + ".tmp").write_text(str(version))
        os.replace(ready + ".tmp", ready)
