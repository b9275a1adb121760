"""A keyed chain: with a secret the writers hold and the database never sees, each hash is an
HMAC, so an owner who rewrites history and recomputes the hashes without the key is caught by
``verify`` alone, no checkpoint needed. Without a key nothing changes (every other test)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from viewstore import EventStore, InvalidArgumentError
from viewstore.domain.chain import GENESIS, chain_hash, event_hash

from ._helpers import condensed_history, guard_off, message

KEY = "writers-only secret"


def test_a_keyed_store_writes_hmacs_on_both_paths(db_url: str) -> None:
    with EventStore(db_url, chain_key=KEY) as store:
        store.create_schema()
        store.append("c", condensed_history())  # ordinary path
        store.append("c", message("m4"))  # fast path
        stored = store.events("c")
        previous = GENESIS
        for event in stored:
            previous = event_hash(
                previous, event.seq, event.event_id, event.payload_json, KEY.encode()
            )
            assert event.hash == previous
        assert store.verify().ok
    with EventStore(db_url, chain_key="another secret") as wrong:
        (problem,) = wrong.verify().problems
        assert problem.startswith("c: hash chain broken at seq 1")
    with EventStore(db_url) as unkeyed:  # a verifier needs the key too
        assert not unkeyed.verify().ok


def test_a_rewrite_without_the_key_is_caught_by_verify_alone(db_url: str) -> None:
    with EventStore(db_url, chain_key=KEY) as store:
        store.create_schema()
        store.append("c", condensed_history())
        store.append("untouched", message("u1"))
    engine = create_engine(db_url)
    try:
        with engine.begin() as conn, guard_off(conn):
            conn.execute(
                text(
                    "UPDATE events SET payload = replace(payload, 'text 2', 'text two') "
                    "WHERE conversation_id = 'c' AND seq = 4"
                )
            )
            previous = conn.execute(
                text("SELECT hash FROM events WHERE conversation_id = 'c' AND seq = 3")
            ).scalar_one()
            rows = conn.execute(
                text(
                    "SELECT seq, event_id, payload FROM events "
                    "WHERE conversation_id = 'c' AND seq >= 4 ORDER BY seq"
                )
            ).all()
            for seq, event_id, payload in rows:  # the owner has no key: plain SHA-256
                previous = chain_hash(previous, seq, event_id, payload)
                conn.execute(
                    text("UPDATE events SET hash = :h WHERE conversation_id = 'c' AND seq = :s"),
                    {"h": previous, "s": seq},
                )
            conn.execute(
                text("UPDATE conversations SET last_hash = :h WHERE id = 'c'"), {"h": previous}
            )
    finally:
        engine.dispose()
    with EventStore(db_url) as owner:
        owner.rebuild()  # the view rows match the rewritten log again
    with EventStore(db_url, chain_key=KEY) as auditor:
        assert auditor.verify().problems == [
            "c: seq 4 (event 'm2'): its hash is a plain SHA-256, not keyed with the chain key: "
            "written or rewritten by someone without the key"
        ]
        assert auditor.verify("untouched").ok


def test_the_key_comes_from_the_environment(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIEWSTORE_CHAIN_KEY", KEY)
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", message("m1"))
    monkeypatch.delenv("VIEWSTORE_CHAIN_KEY")
    with EventStore(db_url, chain_key=KEY) as keyed, EventStore(db_url) as unkeyed:
        assert keyed.verify().ok
        assert not unkeyed.verify().ok


@pytest.mark.parametrize("bad", ["", b"", 42])
def test_a_bad_chain_key_is_refused(sqlite_url: str, bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="chain_key"):
        EventStore(sqlite_url, chain_key=bad)  # type: ignore[arg-type]
