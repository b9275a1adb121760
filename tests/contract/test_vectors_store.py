"""Every reference vector through the store: the stored view equals the real SDK's live path.

After every append, ``store.view()`` (read from the view rows) must equal the expected live-path
digest of that prefix; afterwards ``view(as_of=n)`` must equal the digest after event ``n``,
``resume_view()`` the resume path (``View.from_events``) and ``verify()`` must pass.

Runtime: one event per append (with ``expected_version``) runs on every micro case and on every
case of at most ``ONE_BY_ONE_MAX`` events; seeded random batch splits run on every vector (large
ones in batches of about 250). As-of reads cover every seq of vectors up to ``AS_OF_ALL_MAX``
events and a seeded sample of the larger ones, always including seqs right after condensations.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from viewstore import ConversationNotFoundError, EventStore

from ..store._helpers import EMPTY_DIGEST, Vector, load_vectors, triple, view_digest

ONE_BY_ONE_MAX = 40  # events: larger cases are covered by batch splits and as-of reads
AS_OF_ALL_MAX = 25
AS_OF_SAMPLES = 4  # random seqs per larger vector, plus its first and last event
AS_OF_CONDENSATIONS = 2  # and the seqs right after a few of its condensations
LARGE = 300  # events: a large vector is appended in batches of 150..350 (about 250)
SEED = 20261122


@pytest.fixture(scope="module")
def micro(vectors_dir: Path) -> list[Vector]:
    return load_vectors(vectors_dir, "micro")


@pytest.fixture(scope="module")
def cases(vectors_dir: Path) -> list[Vector]:
    return load_vectors(vectors_dir, "cases")


def random_splits(n: int, rng: random.Random) -> list[tuple[int, int]]:
    """Cut ``range(n)`` into consecutive batches of random sizes."""
    smallest, largest = (150, 350) if n > LARGE else (1, max(4, n // 4))
    splits, start = [], 0
    while start < n:
        end = min(n, start + rng.randint(smallest, largest))
        splits.append((start, end))
        start = end
    return splits


def check_one_by_one(store: EventStore, vector: Vector) -> None:
    digests = vector.expected["prefix_digests"]
    assert len(digests) == len(vector.lines)
    for i, line in enumerate(vector.lines):
        result = store.append(vector.name, line, expected_version=i)
        assert result.version == i + 1
        assert result.appended == [json.loads(line)["id"]]
        got = view_digest(store.view(vector.name))
        assert got == digests[i], f"{vector.name}: after event {i + 1} of {len(vector.lines)}"


def check_random_batches(store: EventStore, vector: Vector, rng: random.Random) -> None:
    digests = vector.expected["prefix_digests"]
    version = 0
    for start, end in random_splits(len(vector.lines), rng):
        result = store.append(vector.name, vector.lines[start:end], expected_version=version)
        version = result.version
        assert version == end
        assert len(result.appended) == end - start
        got = view_digest(store.view(vector.name))
        assert got == digests[end - 1], f"{vector.name}: after batch [{start}, {end})"


def check_reads(store: EventStore, vector: Vector, rng: random.Random) -> None:
    """As-of reads, the resume path and verify, on a conversation holding the whole vector."""
    expected = vector.expected
    digests = expected["prefix_digests"]
    n = len(vector.lines)
    live = expected["incremental"]
    assert triple(store.view(vector.name)) == (
        live["view_ids"],
        live["manipulation_indices"],
        live["unhandled_condensation_request"],
    ), vector.name
    assert view_digest(store.view(vector.name, as_of=0)) == EMPTY_DIGEST
    if n <= AS_OF_ALL_MAX:
        seqs = list(range(1, n + 1))
    else:
        kinds = [json.loads(line)["kind"] for line in vector.lines]
        condensed = [i + 1 for i, kind in enumerate(kinds) if kind == "Condensation"]
        seqs = sorted(
            {
                1,
                n,
                *rng.sample(range(1, n + 1), AS_OF_SAMPLES),
                *rng.sample(condensed, min(AS_OF_CONDENSATIONS, len(condensed))),
            }
        )
    prefixes = expected.get("prefixes")  # micro vectors: the full live view after each event
    for seq in seqs:
        as_of = store.view(vector.name, as_of=seq)
        assert as_of.version == seq
        assert view_digest(as_of) == digests[seq - 1], f"{vector.name}: as_of={seq}"
        if prefixes is not None:
            prefix = prefixes[seq - 1]
            assert triple(as_of) == (
                prefix["view_ids"],
                prefix["manipulation_indices"],
                prefix["unhandled_condensation_request"],
            ), f"{vector.name}: as_of={seq}"
    resume = store.resume_view(vector.name)
    assert triple(resume) == (
        expected["view_ids"],
        expected["manipulation_indices"],
        expected["unhandled_condensation_request"],
    ), vector.name
    report = store.verify(vector.name)
    assert report.ok, report.render()


def test_empty_stream_creates_nothing(store: EventStore, micro: list[Vector]) -> None:
    """m01_empty: appending no events is a no-op at version 0; no conversation exists."""
    (empty,) = [v for v in micro if not v.lines]
    result = store.append(empty.name, [], expected_version=0)
    assert result.version == 0
    assert result.appended == []
    with pytest.raises(ConversationNotFoundError):
        store.view(empty.name)


def test_micro_one_event_at_a_time(store: EventStore, micro: list[Vector]) -> None:
    for vector in micro:
        if vector.lines:
            check_one_by_one(store, vector)


def test_cases_one_event_at_a_time(store: EventStore, cases: list[Vector]) -> None:
    small = [v for v in cases if 0 < len(v.lines) <= ONE_BY_ONE_MAX]
    assert len(small) >= 35
    for vector in small:
        check_one_by_one(store, vector)
        assert view_digest(store.view(vector.name)) == vector.expected["prefix_digests"][-1]


@pytest.mark.parametrize("kind", ["micro", "cases"])
def test_random_batch_splits_then_reads(
    store: EventStore, kind: str, micro: list[Vector], cases: list[Vector], sweep_step: int
) -> None:
    rng = random.Random(SEED)
    vectors = (micro if kind == "micro" else cases)[::sweep_step]
    for vector in vectors:
        if vector.lines:
            check_random_batches(store, vector, rng)
            check_reads(store, vector, rng)
    assert len(store.conversation_ids()) == sum(1 for v in vectors if v.lines)
