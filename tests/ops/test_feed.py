"""The change feed under concurrent writers: 0 missed, 0 repeated, per-conversation seq order.

On PostgreSQL one writer holds its append transactions open just before commit (via the
store's crash-point hook) while the others commit later positions: a reader paging by
position alone would skip those events, and a shadow "naive" reader in this test shows that
it does, while ``store.feed`` misses none.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from viewstore import EventStore, FeedEntry, InvalidArgumentError
from viewstore.store.cursors import decode_feed_cursor as decode_cursor

from ._helpers import backend, is_postgres, message, settled_feed
from ._workers import feed_writer

#: Also on hash-partitioned tables (tests/conftest.py, docs/distribution.md).
PARTITIONED_TOO = True

WRITERS = 3
STEPS = 700  # per writer: 2,100 events per backend (more with the late writer)
LATE_STEPS = 5  # PostgreSQL: appends that each stay uncommitted for HOLD seconds
HOLD = 1.0
DRAIN_DEADLINE = 60.0


def _writer_args(url: str) -> list[tuple[Any, ...]]:
    args: list[tuple[Any, ...]] = [
        (url, w, STEPS, [f"feed-{w}-{k}" for k in range(4)] + ["feed-shared"], (0, 0.0))
        for w in range(WRITERS)
    ]
    if is_postgres(url):
        args.append((url, WRITERS, LATE_STEPS, ["feed-late"], (1, HOLD)))
    return args


def test_feed_tail_misses_and_repeats_nothing(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
    naive_engine = create_engine(db_url)
    ctx = multiprocessing.get_context("spawn")
    args = _writer_args(db_url)
    seen: list[FeedEntry] = []
    naive_seen: set[tuple[str, int]] = set()
    naive_cursor = 0
    calls = 0
    with EventStore(db_url) as store, ctx.Pool(len(args)) as pool:
        pending = pool.starmap_async(feed_writer, args)
        cursor: str | None = None
        deadline: float | None = None
        while True:
            batch = store.feed(after=cursor, limit=100)
            calls += 1
            if batch:
                seen.extend(batch)
                cursor = batch[-1].cursor
            with naive_engine.connect() as conn:  # pages by position only: loses late commits
                rows = conn.execute(
                    text(
                        "SELECT conversation_id, seq, position FROM events "
                        "WHERE position > :p ORDER BY position"
                    ),
                    {"p": naive_cursor},
                ).all()
            if rows:
                naive_seen.update((r[0], r[1]) for r in rows)
                naive_cursor = rows[-1][2]
            if pending.ready():
                if deadline is None:
                    deadline = time.monotonic() + DRAIN_DEADLINE
                    total = store_total(store)
                if len(seen) >= total or time.monotonic() > deadline:
                    break
            if not batch:
                time.sleep(0.01)
        results = pending.get()
        assert store.feed(after=cursor) == []
        stored = all_events(store)
    naive_engine.dispose()

    errors = [e for result in results for e in result["errors"]]
    assert errors == [], errors[:5]
    keys = [(entry.conversation_id, entry.seq) for entry in seen]
    repeated = len(keys) - len(set(keys))
    missed = stored - set(keys)
    assert repeated == 0
    assert missed == set(), sorted(missed)[:10]
    assert set(keys) == stored
    assert len({entry.cursor for entry in seen}) == len(seen)
    by_conversation: dict[str, list[int]] = defaultdict(list)
    for entry in seen:
        by_conversation[entry.conversation_id].append(entry.seq)
    for conv, seqs in by_conversation.items():
        assert seqs == list(range(1, len(seqs) + 1)), conv
    naive_missed = len(stored - naive_seen)
    if is_postgres(db_url):
        held = sum(result["held"] for result in results)
        assert held == LATE_STEPS
        # the scenario really happened: paging by position alone lost late commits
        assert naive_missed > 0
    with capsys.disabled():
        print(
            f"\n[ops] feed {backend(db_url)}: {len(args)} writers, {len(seen)} events "
            f"checked in {calls} feed calls, 0 missed, 0 repeated "
            f"(naive position reader missed {naive_missed})"
        )


def store_total(store: EventStore) -> int:
    return sum(store.version(conv) for conv in store.conversation_ids())


def all_events(store: EventStore) -> set[tuple[str, int]]:
    return {(conv, e.seq) for conv in store.conversation_ids() for e in store.events(conv)}


def test_feed_cursor_paging_and_validation(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        assert store.feed() == []
        for i in range(5):
            store.append("a" if i % 2 else "b", message(f"e{i}"))
        everything = settled_feed(store, 5)
        assert [(e.conversation_id, e.seq, e.event_id, e.kind) for e in everything] == [
            ("b", 1, "e0", "MessageEvent"),
            ("a", 1, "e1", "MessageEvent"),
            ("b", 2, "e2", "MessageEvent"),
            ("a", 2, "e3", "MessageEvent"),
            ("b", 3, "e4", "MessageEvent"),
        ]
        paged: list[FeedEntry] = []
        cursor = None
        while page := store.feed(after=cursor, limit=2):
            assert len(page) <= 2
            paged.extend(page)
            cursor = page[-1].cursor
        assert paged == everything
        assert store.feed(after=everything[-1].cursor) == []
        # Opaque: a prefix and a fixed width, so no cursor reads as a number, and cursors
        # sort as text in feed order (once "0.9" was followed by "0.10").
        cursors = [entry.cursor for entry in everything]
        assert all(c.startswith("f1.") and len(c) == len(cursors[0]) for c in cursors)
        assert sorted(cursors) == cursors
        txid, position = decode_cursor(cursors[1])
        assert store.feed(after=f"{txid}.{position}") == everything[2:]  # the older form
        hexes = ["f1." + "0" * 33, "f1." + "0" * 31, "f1." + "G" * 32, "F1." + "0" * 32]
        for bad in ["", "x", "1", "1.2.3", "-1.2", "1.-2", " 1.2", "9" * 30 + ".1", "1.2\n"]:
            with pytest.raises(InvalidArgumentError, match="cursor"):
                store.feed(after=bad)
        for bad in [*hexes, "f1." + "f" * 32]:  # the last is beyond a 64-bit column
            with pytest.raises(InvalidArgumentError, match="cursor"):
                store.feed(after=bad)
        for bad_type in [12, 1.5, b"0.1", ["0.1"]]:
            with pytest.raises(InvalidArgumentError, match="cursor"):
                store.feed(after=bad_type)  # type: ignore[arg-type]
        for limit in [0, -1, True, "10", 100_001, 2.0]:
            with pytest.raises(InvalidArgumentError, match="limit"):
                store.feed(limit=limit)  # type: ignore[arg-type]


CROWD = 20  # threads
CROWD_APPENDS = 12  # per thread


@pytest.mark.parametrize("round_", range(3))
def test_a_crowd_on_two_conversations_reaches_the_feed_in_seq_order(
    db_url: str, round_: int
) -> None:
    """Twenty threads append one event at a time to the same two conversations, so most
    appends lose the fast path's guard and queue for the row lock. On PostgreSQL a queued
    writer got its transaction id while waiting, and one that others overtook then committed
    its seq under a lower id than theirs, so the feed gave seq 12 before 10 and 11. Before the
    ordinary path checked for that (rows.check_not_overtaken), every PostgreSQL case here failed.
    Each conversation's events must come out in seq order."""
    conversations = [f"crowd-{round_}-{n}" for n in range(2)]
    errors: list[BaseException] = []
    with EventStore(db_url) as store:
        store.create_schema()

        def worker(number: int) -> None:
            try:
                for step in range(CROWD_APPENDS):
                    conversation = conversations[(number + step) % 2]
                    store.append(conversation, [message(f"w{number}-{step}")])
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(CROWD)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors[:3]
        seqs: dict[str, list[int]] = defaultdict(list)
        cursor = None
        # The feed withholds what is above any transaction open on the server (another test's
        # too): read on from the cursor until every event has come, then check the order.
        deadline = time.monotonic() + 60
        while sum(map(len, seqs.values())) < CROWD * CROWD_APPENDS:
            assert time.monotonic() < deadline, {c: len(s) for c, s in seqs.items()}
            if not (page := store.feed(cursor, limit=97)):
                time.sleep(0.05)
                continue
            for entry in page:
                if entry.conversation_id in conversations:
                    seqs[entry.conversation_id].append(entry.seq)
            cursor = page[-1].cursor
        for conversation in conversations:
            assert seqs[conversation] == list(range(1, CROWD * CROWD_APPENDS // 2 + 1)), (
                conversation
            )
