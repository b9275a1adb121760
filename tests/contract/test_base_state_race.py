"""Base-state writes racing each other and appends, from several processes: a write lands
only at the version its writer saw, and every write that returned is counted once."""

from __future__ import annotations

import json
import subprocess
import sys

from viewstore import EventStore

from ..ops._helpers import message

_SAVER = """
import json, sys
from viewstore import ConcurrencyError, EventStore
store = EventStore(sys.argv[1])
saved = refused = 0
for i in range(int(sys.argv[3])):
    at = store.version("r")
    payload = json.dumps({"by": sys.argv[2], "at": at, "n": i})
    try:
        store.save_base_state("r", payload, at_version=at)
        saved += 1
    except ConcurrencyError:
        refused += 1
print(saved, refused)
"""

_APPENDER = """
import sys
from viewstore import EventStore
store = EventStore(sys.argv[1])
for i in range(int(sys.argv[2])):
    store.append("r", {"kind": "MessageEvent", "id": f"m{i}", "source": "agent",
                       "llm_message": {"role": "assistant", "content": []}})
print("done")
"""


STEPS = 150


def test_base_state_writes_race_appends_from_processes(store: EventStore, db_url: str) -> None:
    store.append("r", [message("first")])
    savers = [
        subprocess.Popen(
            [sys.executable, "-c", _SAVER, db_url, name, str(STEPS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    appender = subprocess.Popen(
        [sys.executable, "-c", _APPENDER, db_url, str(STEPS)], stdout=subprocess.PIPE, text=True
    )
    seen = 0
    while any(p.poll() is None for p in savers):
        state = store.base_state("r")
        if state is not None:
            payload = json.loads(state.payload)
            assert payload["at"] == state.at_version <= state.version
            assert state.revision >= seen
            seen = state.revision
    outputs = [p.communicate()[0].split() for p in savers]
    assert appender.communicate()[0].strip() == "done"
    assert all(p.returncode == 0 for p in [*savers, appender])
    saved = sum(int(out[0]) for out in outputs)
    assert saved + sum(int(out[1]) for out in outputs) == 2 * STEPS
    final = store.base_state("r")
    assert final is not None and final.revision == saved  # each returned write counted once
    assert store.version("r") == STEPS + 1
    assert store.verify("r").ok
