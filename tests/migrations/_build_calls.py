"""Make store calls read as JSON from stdin on the store at argv[1], with whichever viewstore
is imported first: tests/migrations/test_migration_from_0016.py runs it with the code of revision
0016 to build a store as that version built it. Each call is ``["append", conversation,
events]``, ``["fork", source, at_seq, new_id]``, ``["fork_latest", source, new_id]`` or
``["redact", conversation, event_id, paths]``. Standalone: it imports nothing of the tests,
which belong to this version."""

from __future__ import annotations

import json
import sys

from viewstore import EventStore


def main(url: str) -> None:
    calls = json.load(sys.stdin)
    with EventStore(url) as store:
        store.create_schema()
        for name, *args in calls:
            if name == "append":
                store.append(args[0], args[1])
            elif name == "fork":
                store.fork(args[0], args[1], args[2])
            elif name == "fork_latest":
                store.fork(args[0], store.view(args[0]).version, args[1])
            elif name == "redact":
                store.redact(args[0], args[1], reason="a secret", paths=args[2])
            else:
                raise ValueError(f"no such call: {name}")
        print(store.schema_revision())


if __name__ == "__main__":
    main(sys.argv[1])
