"""Forks (``store.fork``): a new conversation that shares its source's prefix.

The test that carries the weight: fork a conversation at seq ``s``, append the source's own
later events to the fork, and the fork must then be indistinguishable from the source in
every read (views now and as of every seq, inside the shared prefix too, indices, the request
flag, the log, its hashes, condensations, resume, verify, rebuild), on every reference vector.
On SQLite, PostgreSQL and partitioned PostgreSQL."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from viewstore import (
    ConversationErasedError,
    ConversationExistsError,
    ConversationHasForksError,
    ConversationNotFoundError,
    DuplicateEventError,
    EventStore,
    ForkOrigin,
    InvalidArgumentError,
)

from ..ops._helpers import condensed_history, message, settled_feed
from ..store._helpers import (
    Vector,
    appending_meanwhile,
    count_rows,
    load_vectors,
    triple,
    view_digest,
)

SEED = 20261124


@pytest.fixture(scope="module")
def vectors(vectors_dir: Path) -> list[Vector]:
    return load_vectors(vectors_dir, "micro") + load_vectors(vectors_dir, "cases")[::40]


def _fork_points(vector: Vector, rng: random.Random) -> list[int]:
    n = len(vector.lines)
    kinds = [json.loads(line)["kind"] for line in vector.lines]
    around = {
        seq
        for i, kind in enumerate(kinds)
        if kind in ("Condensation", "CondensationRequest")
        for seq in (i, i + 1, i + 2)
    }
    points = {1, n, *rng.sample(range(1, n + 1), min(3, n)), *list(around)[:4]}
    return sorted(seq for seq in points if 1 <= seq <= n)


def _same_reads(store: EventStore, fork: str, source: str, seqs: list[int]) -> None:
    assert triple(store.view(fork)) == triple(store.view(source))
    for seq in seqs:
        assert view_digest(store.view(fork, as_of=seq)) == view_digest(
            store.view(source, as_of=seq)
        ), f"as_of={seq}"
        page = store.view_page(fork, as_of=seq, first=0, limit=3)
        assert [e.id for e in page.view.events] == [
            e.id for e in store.view(source, as_of=seq).events[:3]
        ]
    theirs, ours = store.events(source), store.events(fork)
    assert [(e.seq, e.event_id, e.payload_json, e.hash) for e in ours] == [
        (e.seq, e.event_id, e.payload_json, e.hash) for e in theirs
    ]
    assert {e.conversation_id for e in ours} == {fork}
    assert store.condensations(fork) == store.condensations(source)
    assert triple(store.resume_view(fork)) == triple(store.resume_view(source))
    assert store.live_equals_resume(fork) == store.live_equals_resume(source)
    assert store.log_index(fork) == store.log_index(source)


def test_a_fork_continued_like_its_source_reads_like_it(
    store: EventStore, vectors: list[Vector], sweep_step: int
) -> None:
    rng = random.Random(SEED)
    for vector in vectors[::sweep_step]:
        source = vector.name
        store.append(source, vector.lines)
        n = len(vector.lines)
        seqs = sorted({1, n, *rng.sample(range(1, n + 1), min(4, n))})
        for at in _fork_points(vector, rng):
            fork = f"{source}~{at}"
            assert store.fork(source, at, fork) == fork
            assert view_digest(store.view(fork)) == view_digest(store.view(source, as_of=at))
            assert store.version(fork) == at
            rest = vector.lines[at:]
            for start in range(0, len(rest), 97):
                store.append(fork, rest[start : start + 97], expected_version=at + start)
            _same_reads(store, fork, source, seqs)
            report = store.verify(fork)
            assert report.ok, (vector.name, at, report.conversations[0].problems)


def test_fork_writes_only_the_view_rows(store: EventStore) -> None:
    store.append("long", condensed_history())
    store.append("long", [message(f"n{i}") for i in range(300)])
    at = store.version("long")
    view = store.view("long")
    before = {t: count_rows(store.engine, t) for t in ("events", "view_entries")}
    store.fork("long", at, "copy")
    assert count_rows(store.engine, "events") == before["events"]  # the log is shared
    added = count_rows(store.engine, "view_entries") - before["view_entries"]
    assert added == len(view.events)
    assert count_rows(
        store.engine, "manipulation_indices", "conversation_id = :c", c="copy"
    ) == len(view.manipulation_indices)


def test_forks_of_forks_and_as_of_inside_every_prefix(store: EventStore) -> None:
    store.append("root", [message(f"r{i}") for i in range(1, 11)])
    store.fork("root", 6, "child")
    store.append("child", [message(f"c{i}") for i in range(7, 13)])
    store.fork("child", 9, "grandchild")
    store.append("grandchild", [message(f"g{i}") for i in range(10, 15)])
    store.fork("grandchild", 4, "shallow")  # inside root's part: forks root itself
    ids = [e.event_id for e in store.events("grandchild")]
    assert ids == [f"r{i}" for i in range(1, 7)] + ["c7", "c8", "c9"] + [
        f"g{i}" for i in range(10, 15)
    ]
    assert store.fork_origin("grandchild") == ForkOrigin("child", 9, "root")
    assert store.fork_origin("shallow") == ForkOrigin("root", 4, "root")
    assert store.fork_origin("root") is None
    assert store.forks("root") == ["child", "shallow"]
    for seq in range(15):
        view = store.view("grandchild", as_of=seq)
        assert [e.id for e in view.events] == ids[:seq], seq
        assert view.conversation_id == "grandchild"
    assert store.events("grandchild", after=5, limit=3)[0].event_id == "r6"
    assert [e.event_id for e in store.events("grandchild", after=5, limit=3)] == ["r6", "c7", "c8"]
    assert store.event("grandchild", "r2") is not None
    assert store.event("grandchild", "c10") is None  # not in this lineage
    assert store.verify().ok
    assert store.rebuild("grandchild") == 1
    assert store.verify("grandchild").ok


def test_a_fork_refuses_ids_of_its_shared_prefix(store: EventStore) -> None:
    store.append("src", [message("m1"), message("m2"), message("m3")])
    store.fork("src", 2, "f")
    assert store.append("f", [message("m1")]).duplicates == ["m1"]  # an exact resend: a no-op
    with pytest.raises(DuplicateEventError):
        store.append("f", [message("m2", "other text")])
    assert store.append("f", [message("m3")]).appended == ["m3"]  # after the fork: not shared
    for _ in range(3):  # later appends stay on the checking path
        with pytest.raises(DuplicateEventError):
            store.append("f", [message("m1", "changed")])
    assert store.append("f", [message("m1"), message("m2")], expected_version=0).duplicates == [
        "m1",
        "m2",
    ]  # a retry from the start, read through the prefix
    assert store.version("f") == 3


def test_fork_is_refused_clearly(store: EventStore) -> None:
    store.append("src", [message("m1"), message("m2")])
    with pytest.raises(ConversationNotFoundError):
        store.fork("nope", 1)
    for bad in (0, 3, -1, True, "1"):
        with pytest.raises(InvalidArgumentError):
            store.fork("src", bad)  # type: ignore[arg-type]
    store.fork("src", 1, "taken")
    with pytest.raises(ConversationExistsError):
        store.fork("src", 1, "taken")
    with pytest.raises(ConversationExistsError):
        store.fork("src", 1, "src")
    store.append("gone", [message("g1")])
    store.erase("gone", reason="test")
    with pytest.raises(ConversationErasedError):
        store.fork("src", 1, "gone")
    with pytest.raises(ConversationErasedError):
        store.fork("gone", 1)
    with pytest.raises(InvalidArgumentError):
        store.fork("src", 1, "..")
    assert len(store.fork("src", 2)) == 32  # a new UUID


def test_a_source_with_forks_is_not_erased(store: EventStore) -> None:
    store.append("src", [message("m1"), message("m2")])
    store.fork("src", 1, "f1")
    with pytest.raises(ConversationHasForksError, match="f1"):
        store.erase("src", reason="test")
    assert store.version("src") == 2
    store.erase("f1", reason="the fork first")
    assert store.events("src")[0].event_id == "m1"
    store.erase("src", reason="then the source")
    assert store.conversation_ids() == []
    assert store.verify().ok


def test_prune_takes_the_forks_first(store: EventStore) -> None:
    store.append("src", [message("m1")])
    store.fork("src", 1, "f1")
    later = datetime.now(UTC) + timedelta(days=1)
    assert store.inactive_conversations(before=later) == ["f1"]
    store.erase("f1", reason="retention")
    assert store.inactive_conversations(before=later) == ["src"]


def test_source_appends_while_forked(store: EventStore) -> None:
    store.append("src", [message(f"m{i}") for i in range(1, 21)])

    def append(other: EventStore, i: int) -> None:
        other.append("src", [message(f"m{21 + i}")])

    with appending_meanwhile(store, append, 180):
        for at in range(5, 20):
            store.fork("src", at, f"f{at}")
    for at in range(5, 20):
        assert [e.id for e in store.view(f"f{at}").events] == [f"m{i}" for i in range(1, at + 1)]
    assert store.verify().ok


def test_forks_in_the_feed_catalogue_and_export(store: EventStore, tmp_path: Path) -> None:
    store.append("src", [message("m1"), message("m2")])
    store.fork("src", 1, "f")
    store.append("f", [message("f2")])
    entries = settled_feed(store, 3)
    assert [(e.conversation_id, e.seq) for e in entries if e.conversation_id == "f"] == [("f", 2)]
    assert {c.id for c in store.conversations()} == {"src", "f"}
    with store.engine.connect() as conn:
        family = conn.execute(text("SELECT family_id FROM conversations WHERE id = 'f'"))
        assert family.scalar_one() == "src"
