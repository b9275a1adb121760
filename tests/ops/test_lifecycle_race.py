"""The lifecycle raced from several processes: appends, forks (of forks, at heads, inside
shared prefixes, at an ancestor's head), redactions, erasures, compactions of one conversation
or of the whole store, and the catalogue's size copies refreshed and read, over shared fork
families.

At the end every living conversation equals its replay and verifies, every acknowledged append
is stored exactly once where it was made, no redacted event's content survives in any
table (log, view rows, condensation summaries, forks' copies), no live view holds a compacted
event, and the size orders list every living conversation by its present figures.

``VIEWSTORE_RACE_STEPS`` sets the steps per worker (default: a short run for CI). The long run
that found the fork and redaction races of issue 26 before they were fixed:
``VIEWSTORE_RACE_STEPS=1500 pytest tests/ops/test_lifecycle_race.py``.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.domain.scrub import COMPACTED
from viewstore.store.read.sizes import SIZE_ORDERS

from ..store._helpers import triple
from ._helpers import backend
from ._lifecycle_workers import KEY_PREFIX, lifecycle_worker, token

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

WORKERS = 4
STEPS = int(os.environ.get("VIEWSTORE_RACE_STEPS", "120"))
ROOTS = ["root-0", "root-1"]


def _seed_roots(store: EventStore) -> None:
    for root in ROOTS:
        store.append(
            root,
            [
                {
                    "id": f"{root}-m{i}",
                    "source": "user",
                    "kind": "MessageEvent",
                    "llm_message": {
                        "role": "user",
                        "content": [{"type": "text", "text": token(f"{root}-m{i}")}],
                    },
                }
                for i in range(4)
            ],
            expected_version=0,
        )


def _leaks(store: EventStore, event_ids: set[str]) -> list[tuple[str, str, str]]:
    """Rows of any table that still hold the token of a redacted event."""
    found: list[tuple[str, str, str]] = []
    sources = [
        ("events", "payload"),
        ("view_entries", "payload"),
        ("condensations", "summary"),
    ]
    with store.engine.connect() as conn:
        for table, column in sources:
            rows = conn.execute(
                text(
                    f"SELECT conversation_id, {column} FROM {table} "
                    f"WHERE {column} LIKE '%<secret-%'"
                )
            )
            for conv, value in rows:
                for eid in event_ids:
                    if token(eid) in value:
                        found.append((table, conv, eid))
    return found


def _check_appends(store: EventStore, results: list[dict[str, Any]], living: set[str]) -> int:
    acknowledged: dict[str, list[str]] = {}
    for result in results:
        for conv, ids in result["appended"]:
            acknowledged.setdefault(conv, []).extend(ids)
    checked = 0
    for conv in living:
        log = store.events(conv)
        ids = Counter(event.event_id for event in log)
        assert all(n == 1 for n in ids.values()), (conv, [e for e, n in ids.items() if n > 1])
        assert [event.seq for event in log] == list(range(1, len(log) + 1)), conv
        origin = store.fork_origin(conv)
        own = {e.event_id for e in log if origin is None or e.seq > origin.at_seq}
        mine = set(acknowledged.get(conv, []))
        assert mine <= own, (conv, sorted(mine - own)[:5])  # acknowledged, yet not stored
        if not conv.startswith("root"):
            assert own <= mine, (conv, sorted(own - mine)[:5])  # stored, never acknowledged
        checked += len(mine)
    return checked


def _check_compacted(store: EventStore, living: set[str]) -> int:
    """No live view of a living conversation holds an event compaction took, and each
    compacted event's content reads as such; the number of compacted events."""
    compacted = {
        (record.conversation_id, record.seq)
        for conv in living
        for record in store.redactions(conv)
        if record.compacted
    }
    for conv in living:
        for event in store.view(conv).events:
            assert COMPACTED not in event.payload_json, (conv, event.id)
    for owner, seq in compacted:
        (event,) = store.events(owner, after=seq - 1, limit=1)
        assert COMPACTED in event.payload_json, (owner, seq)
    return len(compacted)


def _check_masked(store: EventStore, results: list[dict[str, Any]], living: set[str]) -> int:
    """No row of any table holds a key masking took; every acknowledged keyed message of a
    living conversation has its record (a redaction since keeps it); the number of records."""
    with store.engine.connect() as conn:
        for table, column in (
            ("events", "payload"),
            ("view_entries", "payload"),
            ("condensations", "summary"),
            ("masks", "masked"),
        ):
            found = conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE {column} LIKE :key"),
                {"key": f"%{KEY_PREFIX}%"},
            ).scalar()
            assert found == 0, (table, found)
    recorded = {(r.conversation_id, r.event_id) for conv in living for r in store.masks(conv)}
    for result in results:
        for conv, ids in result["appended"]:
            if conv not in living:
                continue
            keyed = [eid for eid in ids if eid.endswith("m")]
            for event in store.events(conv):
                if event.event_id in keyed and "[masked:race-key]" in event.payload_json:
                    assert (conv, event.event_id) in recorded, (conv, event.event_id)
    return len(recorded)


def _policy_redacted(store: EventStore, living: set[str]) -> set[str]:
    """The events a retention policy's ``redact_after`` redacted."""
    return {
        record.event_id
        for conv in living
        for record in store.redactions(conv)
        if record.policy is not None and not record.compacted
    }


def _check_size_orders(store: EventStore) -> None:
    """Each size order lists the living conversations by their present figures, and after a
    full refresh every copy is its conversation's."""
    for order in SIZE_ORDERS:
        for descending in (False, True):
            way = "DESC" if descending else "ASC"
            with store.engine.connect() as conn:
                exact = list(
                    conn.execute(
                        text(f"SELECT id FROM conversations ORDER BY {order} {way}, id {way}")
                    ).scalars()
                )
            listed = store.conversations(order_by=order, descending=descending)
            assert [c.id for c in listed] == exact, (order, descending)
    store.refresh_catalogue_sizes(full=True)
    with store.engine.connect() as conn:
        stale = conn.execute(
            text(
                "SELECT count(*) FROM conversations c LEFT JOIN catalogue_sizes s "
                "ON s.conversation_id = c.id WHERE s.updated_at IS NULL "
                "OR s.updated_at <> c.updated_at OR s.version <> c.version "
                "OR s.view_length <> c.view_length"
            )
        ).scalar()
        orphans = conn.execute(
            text(
                "SELECT count(*) FROM catalogue_sizes s LEFT JOIN conversations c "
                "ON c.id = s.conversation_id WHERE c.id IS NULL"
            )
        ).scalar()
    assert (stale, orphans) == (0, 0)


def test_forks_redactions_erasures_and_appends_race_cleanly(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        _seed_roots(store)
    ctx = multiprocessing.get_context("spawn")
    started = time.monotonic()
    with ctx.Pool(WORKERS) as pool:
        results = pool.starmap(
            lifecycle_worker, [(db_url, w, STEPS, 1000 + w) for w in range(WORKERS)]
        )
    elapsed = time.monotonic() - started
    errors = [error for result in results for error in result["errors"]]
    assert errors == [], errors[:5]

    counts: Counter[str] = Counter()
    for result in results:
        counts.update(result["counts"])
    erased = {conv for result in results for conv in result["erased"]}
    redacted = {eid for result in results for _conv, eid in result["redacted"]}
    with EventStore(db_url) as store:
        living = set(store.conversation_ids())
        assert not living & erased
        problems = {}
        for conv in sorted(living):
            view = store.view(conv)
            assert triple(view) == triple(store.replay(conv)), conv
            report = store.verify(conv)
            if not report.ok:
                problems[conv] = report.problems
        assert problems == {}, list(problems.items())[:3]
        by_policy = _policy_redacted(store, living)
        assert _leaks(store, redacted | by_policy) == []
        appended = _check_appends(store, results, living)
        assert store.verify().ok
        compacted = _check_compacted(store, living)
        masked = _check_masked(store, results, living)
        _check_size_orders(store)
    with capsys.disabled():
        print(
            f"\n[ops] lifecycle race {backend(db_url)}: {WORKERS} processes x {STEPS} steps, "
            f"{dict(counts)}, {appended} acknowledged events checked, {len(living)} "
            f"conversations, {len(redacted)} events redacted, {len(by_policy)} by policy, "
            f"{compacted} compacted, {masked} masked, "
            f"{elapsed:.1f}s"
        )
