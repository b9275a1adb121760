"""A redaction must be checkable against what was committed at append (issue 26, item 4).

The owner rewrites a payload and writes a redaction record computed the public way, fixing
every copy up: ``verify``, and ``verify`` against a checkpoint taken before, must name the
event, keyed store or not. Legitimate redactions (all content, by paths, in rounds) still
verify; events hashed before chain scheme 2 verify unredacted, and their redaction is checked
as far as it can be (docs/lifecycle.md). On SQLite, PostgreSQL and partitioned PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, insert, select, text, update

from viewstore import EventStore, InvalidArgumentError
from viewstore.domain import leaves
from viewstore.domain.chain import (
    GENESIS,
    chain_hash,
    chain_hash2,
    event_hash,
    leaf_digest,
    text_digest,
)
from viewstore.domain.events import canonical_json
from viewstore.domain.scrub import MARK, digest
from viewstore.store.database.schema import conversations, events, redactions, view_entries
from viewstore.store.lifecycle.redaction import record_hash

from .._json_pointers import at, json_values, put, string_pointers
from ..ops._helpers import action, guard_off, message, observation

# Blocking store only: the forgeries written through ``store.engine`` are the subject here;
# verify through the asyncio store is test_verify_rebuild.py's and test_redaction.py's.
pytestmark = pytest.mark.sync_only

KEY = "writers-only secret"
ORIGINAL = "transfer 10 USD to bob"
FORGED = "transfer 99999 USD to mallory"


def _history(store: EventStore) -> None:
    store.append("c", [message("m1", "hello")])
    store.append("c", [message("t1", ORIGINAL, memo="10 USD")])
    store.append("c", [action("a1", "tc1"), observation("o1", "tc1", "a1")])
    store.append("c", [message("m2", "thanks")])


def _row(conn: Connection, event_id: str) -> Any:
    return conn.execute(
        select(events.c.seq, events.c.payload, events.c.hash).where(
            events.c.conversation_id == "c", events.c.event_id == event_id
        )
    ).one()


def _previous(conn: Connection, seq: int) -> str:
    if seq == 1:
        return GENESIS
    found = conn.execute(
        select(events.c.hash).where(events.c.conversation_id == "c", events.c.seq == seq - 1)
    ).scalar_one()
    return str(found)


def _rewrite(conn: Connection, event_id: str, payload: str) -> None:
    """The payload changed everywhere the store keeps it, as the owner can with the guard off."""
    with guard_off(conn):
        conn.execute(
            update(events)
            .where(events.c.conversation_id == "c", events.c.event_id == event_id)
            .values(payload=payload)
        )
    conn.execute(
        update(view_entries)
        .where(
            view_entries.c.conversation_id == "c",
            view_entries.c.seq
            == select(events.c.seq)
            .where(events.c.conversation_id == "c", events.c.event_id == event_id)
            .scalar_subquery(),
            view_entries.c.is_summary.is_(False),
        )
        .values(payload=payload)
    )


def _forge(
    store: EventStore, event_id: str, forged: str, leaf_digests: str | None, round_: int = 1
) -> None:
    """Rewrite the event's payload to ``forged`` and insert the record ``redact`` would have
    written, computed the public way (no chain key: the forger has none)."""
    with store.engine.begin() as conn:
        row = _row(conn, event_id)
        earlier = conn.execute(
            select(redactions.c.redacted_digest).where(
                redactions.c.conversation_id == "c", redactions.c.seq == row.seq
            )
        ).all()
        values: dict[str, Any] = {
            "conversation_id": "c",
            "seq": row.seq,
            "round": round_,
            "event_id": event_id,
            "paths": None,
            "reason": "customer request",
            "redacted_at": datetime.now(UTC),
            "redacted_by": None,
            "previous_hash": _previous(conn, row.seq),
            "event_hash": row.hash,
            "removed_digest": earlier[-1].redacted_digest if earlier else digest(row.payload),
            "redacted_digest": digest(forged),
            "leaf_digests": leaf_digests,
        }
        values["record_hash"] = record_hash(values, None)
        conn.execute(insert(redactions).values(values))
        _rewrite(conn, event_id, forged)


def _payload(store: EventStore, event_id: str) -> dict[str, Any]:
    with store.engine.connect() as conn:
        value: dict[str, Any] = json.loads(_row(conn, event_id).payload)
        return value


def _with_text(value: dict[str, Any], text_: str, memo: str | None = None) -> str:
    changed = json.loads(json.dumps(value))
    changed["llm_message"]["content"][0]["text"] = text_
    if memo is not None:
        changed["memo"] = memo
    return canonical_json(changed)


_TEXT = "/llm_message/content/0/text"


def _no_leaf_digests(original: dict[str, Any]) -> tuple[str, str | None]:
    # The forgery exactly: what a record held before revision 0016.
    return _with_text(original, FORGED), None


def _claims_the_rewrite(original: dict[str, Any]) -> tuple[str, str | None]:
    forged = _with_text(original, FORGED)
    return forged, leaves.encode(leaves.replaced(canonical_json(original), forged, None))


def _marks_one_rewrites_another(original: dict[str, Any]) -> tuple[str, str | None]:
    marked = _with_text(original, MARK)
    digests = leaves.replaced(canonical_json(original), marked, None)
    return _with_text(original, MARK, memo="99999 USD"), leaves.encode(digests)


def _marker_over_a_false_original(original: dict[str, Any]) -> tuple[str, str | None]:
    return _with_text(original, MARK), leaves.encode({_TEXT: leaf_digest(FORGED, None)})


FORGERIES: dict[str, Callable[[dict[str, Any]], tuple[str, str | None]]] = {
    "no-leaf-digests": _no_leaf_digests,
    "claims-the-rewrite": _claims_the_rewrite,
    "marks-one-rewrites-another": _marks_one_rewrites_another,
    "marker-over-a-false-original": _marker_over_a_false_original,
}


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
@pytest.mark.parametrize("forgery", list(FORGERIES))
def test_a_forged_redaction_is_named_by_verify_and_against_a_checkpoint(
    db_url: str, keyed: bool, forgery: str
) -> None:
    with EventStore(db_url, chain_key=KEY if keyed else None) as store:
        store.create_schema()
        _history(store)
        assert store.verify().ok
        checkpoint = json.loads(json.dumps(store.checkpoint()))
        forged, leaf_digests = FORGERIES[forgery](_payload(store, "t1"))
        _forge(store, "t1", forged, leaf_digests)
        assert store.view("c").events[1].payload_json == forged  # every copy fixed up
        for report in (store.verify(), store.verify(against=checkpoint)):
            assert not report.ok
            assert any("seq 2 (event 't1')" in problem for problem in report.problems), (
                report.problems
            )


@pytest.mark.parametrize("replacement", [FORGED, "", MARK + " "])
def test_a_rewrite_inside_a_redacted_path_is_named(store: EventStore, replacement: str) -> None:
    _history(store)
    store.redact("c", "t1", reason="account details", paths=[_TEXT])
    assert store.verify().ok
    # A second round, computed the public way, that "redacts" nothing new.
    _forge(store, "t1", _with_text(_payload(store, "t1"), replacement), "{}", round_=2)
    problems = store.verify().problems
    assert any(
        f"seq 2 (event 't1'): rewritten, not only redacted: recorded path {_TEXT} holds" in problem
        for problem in problems
    ), problems


def test_legitimate_redactions_verify(store: EventStore) -> None:
    _history(store)
    checkpoint = store.checkpoint()
    store.redact("c", "t1", reason="the amount", paths=["/memo"])
    store.redact("c", "t1", reason="and the text", paths=[_TEXT])  # a second round
    store.redact("c", "m1", reason="all of it")
    store.redact("c", "o1", reason="tool output", paths=["/observation/content"])
    records = store.redactions("c")
    assert [(r.event_id, r.round) for r in records] == [
        ("m1", 1),
        ("t1", 1),
        ("t1", 2),
        ("o1", 1),
    ]
    assert [json.loads(r.leaf_digests or "null") for r in records if r.event_id == "t1"] == [
        {"/memo": leaf_digest("10 USD", None)},
        {_TEXT: leaf_digest(ORIGINAL, None)},
    ]
    for report in (store.verify(), store.verify(against=checkpoint)):
        assert report.ok, report.problems
    store.append("c", [message("m3", "after")])
    assert store.verify(against=checkpoint).ok


def test_a_keyed_store_keys_its_leaf_digests(db_url: str) -> None:
    with EventStore(db_url, chain_key=KEY) as store:
        store.create_schema()
        _history(store)
        (record,) = [store.redact("c", "t1", reason="r", paths=[_TEXT])]
        assert record.leaf_digests is not None
        (found,) = json.loads(record.leaf_digests).values()
        # A guess at the removed text cannot be confirmed without the key.
        assert found != leaf_digest(ORIGINAL, None)
        assert store.verify().ok
    with EventStore(db_url) as unkeyed:
        assert not unkeyed.verify().ok


def _as_scheme_1(store: EventStore) -> None:
    """Rehash every event with the hash they had before chain scheme 2 (an upgraded store)."""
    with store.engine.begin() as conn, guard_off(conn):
        previous = GENESIS
        rows = conn.execute(
            select(events.c.seq, events.c.event_id, events.c.payload)
            .where(events.c.conversation_id == "c")
            .order_by(events.c.seq)
        ).all()
        for row in rows:
            previous = chain_hash(previous, row.seq, row.event_id, row.payload, store._chain_key)
            conn.execute(
                update(events)
                .where(events.c.conversation_id == "c", events.c.seq == row.seq)
                .values(hash=previous)
            )
        conn.execute(
            update(conversations).where(conversations.c.id == "c").values(last_hash=previous)
        )


def test_events_hashed_before_scheme_2_still_verify(store: EventStore) -> None:
    _history(store)
    _as_scheme_1(store)
    store.append("c", [message("m3", "appended after the upgrade")])
    assert store.verify().ok
    # Without a chain key nothing could tell their redaction from a forged one.
    with pytest.raises(InvalidArgumentError, match="hashed before chain scheme 2"):
        store.redact("c", "t1", reason="r")
    assert store.redactions("c") == []
    store.redact("c", "m3", reason="hashed under scheme 2: checkable")
    assert store.verify().ok


def test_a_keyed_store_redacts_events_hashed_before_scheme_2(db_url: str) -> None:
    with EventStore(db_url, chain_key=KEY) as store:
        store.create_schema()
        _history(store)
        _as_scheme_1(store)
        record = store.redact("c", "t1", reason="r", paths=[_TEXT])
        assert record.leaf_digests is None
        store.redact("c", "t1", reason="r2", paths=["/memo"])
        report = store.verify()
        assert report.ok, report.problems
        assert any("hashed before chain scheme 2" in note for note in report.conversations[0].notes)


def test_a_record_without_leaf_digests_is_never_taken_on_trust(store: EventStore) -> None:
    """Unkeyed: whatever the event's scheme, a record without leaf digests is a problem (the
    forger of a scheme-2 event would otherwise write one and call the event old)."""
    _history(store)
    _as_scheme_1(store)
    original = _payload(store, "t1")
    _forge(store, "t1", _with_text(original, MARK), None)  # even a truthful one
    (problem,) = store.verify().problems
    assert "seq 2 (event 't1'): its redaction cannot be checked" in problem


def test_stripped_leaf_digests_are_named(db_url: str) -> None:
    with EventStore(db_url, chain_key=KEY) as store:
        store.create_schema()
        _history(store)
        store.redact("c", "t1", reason="r", paths=[_TEXT])
        with store.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("ALTER TABLE redactions DISABLE TRIGGER USER"))
            else:
                conn.execute(text("DROP TRIGGER redactions_append_only_update"))
            conn.execute(update(redactions).values(leaf_digests=None))
        problems = store.verify().problems
        assert any("redaction record 1 does not match its own hash" in p for p in problems)


# -- the scheme itself, on random JSON ------------------------------------------------------

_JSON = json_values(text=8, keys=4, leaves=20)


@settings(max_examples=300, deadline=None)
@given(
    body=st.dictionaries(st.text(max_size=4), _JSON, min_size=1, max_size=5),
    chosen=st.data(),
    keyed=st.booleans(),
)
def test_any_redaction_verifies_and_any_other_change_is_named(
    body: dict[str, Any], chosen: st.DataObject, keyed: bool
) -> None:
    key = KEY.encode() if keyed else None
    original = canonical_json(body)
    stored = event_hash(GENESIS, 1, "e", original, key)
    pointers = string_pointers(body)
    redacted_at = chosen.draw(st.lists(st.sampled_from(pointers), unique=True)) if pointers else []
    value = json.loads(original)
    for pointer in redacted_at:
        put(value, pointer, MARK)
    redacted = canonical_json(value)
    digests = leaves.replaced(original, redacted, key)

    def check(payload: str) -> bool:
        try:
            root = leaves.redacted_root(payload, digests, MARK, key)
        except ValueError:
            return False
        return chain_hash2(GENESIS, 1, "e", text_digest(original), root, key=key) == stored

    assert check(redacted)
    # One more change anywhere: a string, a number, a key, a value's type.
    changed = json.loads(redacted)
    targets = string_pointers(changed)
    how = chosen.draw(st.sampled_from(["string", "add-key"] if targets else ["add-key"]))
    if how == "string":
        pointer = chosen.draw(st.sampled_from(targets))
        old = at(json.loads(redacted), pointer)
        new = chosen.draw(st.text(max_size=8).filter(lambda s: s != old) | st.integers())
        put(changed, pointer, new)
    else:
        name = chosen.draw(st.text(max_size=4).filter(lambda s: s not in changed))
        changed[name] = chosen.draw(_JSON)
    assert not check(canonical_json(changed))
