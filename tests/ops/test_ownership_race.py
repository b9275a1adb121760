"""Ownership raced from several processes (docs/fleet.md, "Ownership"): four sources claim,
describe and append to the same new conversations while an operator hands some over and
erases others. Each conversation ends with one owner; no source wrote to one it did not own
at that moment; an erased conversation keeps no catalogue row; every survivor verifies."""

from __future__ import annotations

import multiprocessing

from viewstore import EventStore

from ._ownership_workers import ingest_worker, operator_worker

PARTITIONED_TOO = True
SOURCES = ["s0", "s1", "s2", "s3"]
CONVERSATIONS = [f"conv-{i}" for i in range(12)]


def test_claims_infos_appends_hand_overs_and_erasures_race_cleanly(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(len(SOURCES) + 1) as pool:
        ingests = [
            pool.apply_async(ingest_worker, (db_url, source, CONVERSATIONS, seed))
            for seed, source in enumerate(SOURCES)
        ]
        operator = pool.apply_async(operator_worker, (db_url, CONVERSATIONS, 99))
        results = [job.get(timeout=300) for job in ingests]
        moved = operator.get(timeout=300)
    first_owners: dict[str, list[str]] = {}
    for result in results:
        for key in result["won"]:
            first_owners.setdefault(key, []).append(result["source"])
    assert all(len(owners) == 1 for owners in first_owners.values()), first_owners
    with EventStore(db_url) as store:
        living = set(store.conversation_ids())
        assert {k for k in moved["erased"] if store.tombstone(k) is None} == set()
        for key in CONVERSATIONS:
            owner = store.conversation_owner(key)
            if store.tombstone(key) is not None:
                assert owner is None and store.conversation_info(key) is None
                continue
            if key not in living:
                continue
            # Every event is a source's that owned the conversation when it appended: its
            # first owner's, or after a hand-over nobody's (the operator appends nothing).
            writers = {e.event_id.split("-")[0] for e in store.events(key)}
            assert writers <= set(first_owners.get(key, [])), (key, writers, first_owners)
            info = store.conversation_info(key)
            assert info is not None and info.source == owner
            assert owner in (*first_owners.get(key, []), "operator")
        assert store.verify().ok
    refused = sum(result["refused"] for result in results)
    assert refused >= len(CONVERSATIONS) * (len(SOURCES) - 1)
