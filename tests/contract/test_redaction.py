"""Redaction (``store.redact``): the content of an event goes from the log and from every copy,
its envelope stays, so views and indices do not change; an append-only record explains the
change; ``verify`` reports the redaction, carries the chain across it and still finds every
other change at the right seq. On SQLite, PostgreSQL and partitioned PostgreSQL."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import (
    ChainMismatchError,
    ConversationNotFoundError,
    EventStore,
    InvalidArgumentError,
    Redaction,
    UnredactablePathError,
)
from viewstore.domain.scrub import MARK

from ..ops._helpers import action, condensed_history, guard_off, message, observation
from ..store._helpers import appending_meanwhile, triple

SECRET = "sk-live-0123456789"


def _with_secrets(store: EventStore, cid: str = "c") -> None:
    store.append(cid, [message("u1", f"my key is {SECRET}")])
    store.append(cid, [action("a1", "tc1"), observation("o1", "tc1", "a1")])
    store.append(cid, [message("m2", "thanks")])


def _everything(store: EventStore) -> str:
    """Every text the store holds, from every table: where a secret could still hide."""
    with store.engine.connect() as conn:
        tables = [
            "events",
            "view_entries",
            "condensations",
            "base_states",
            "redactions",
            "conversations",
        ]
        return json.dumps(
            [
                [str(value) for value in row]
                for table in tables
                for row in conn.execute(text(f"SELECT * FROM {table}"))
            ]
        )


def test_redact_removes_the_content_everywhere_and_keeps_the_view(store: EventStore) -> None:
    _with_secrets(store)
    before = store.view("c")
    assert SECRET in _everything(store)
    record = store.redact("c", "u1", reason="a customer's API key")
    assert isinstance(record, Redaction)
    assert (record.seq, record.round, record.paths) == (1, 1, None)
    assert SECRET not in _everything(store)
    after = store.view("c")
    assert triple(after) == triple(before)
    assert [e.id for e in store.view("c", as_of=1).events] == ["u1"]
    (stored,) = [e for e in store.events("c") if e.event_id == "u1"]
    assert MARK in stored.payload_json and stored.payload_json == after.events[0].payload_json
    assert json.loads(stored.payload_json)["source"] == "user"  # the envelope stays
    report = store.verify("c")
    assert report.ok, report.problems
    assert any("seq 1 (event 'u1') redacted" in note for note in report.conversations[0].notes)
    assert store.redactions("c") == [record]


def test_redact_only_some_paths(store: EventStore) -> None:
    _with_secrets(store)
    original = json.loads(next(e for e in store.events("c") if e.event_id == "o1").payload_json)
    record = store.redact("c", "o1", reason="tool output", paths=["/observation/content/0/text"])
    assert record.paths == ("/observation/content/0/text",)
    redacted = json.loads(next(e for e in store.events("c") if e.event_id == "o1").payload_json)
    assert redacted["observation"]["content"][0] == {"type": "text", "text": MARK}
    redacted["observation"]["content"][0]["text"] = "ok"
    assert redacted == original  # nothing else changed
    # What is left under /observation is what it is (its kind, its content's types): kept.
    with pytest.raises(InvalidArgumentError, match="nothing left to redact"):
        store.redact("c", "o1", reason="and the rest", paths=["/observation"])
    store.append("c", [message("m3", "a secret", note="another")])
    store.redact("c", "m3", reason="a note", paths=["/note"])
    store.redact("c", "m3", reason="and the rest", paths=["/llm_message"])
    assert [r.round for r in store.redactions("c")] == [1, 1, 2]
    redacted = json.loads(next(e for e in store.events("c") if e.event_id == "m3").payload_json)
    assert redacted["llm_message"] == {"role": "user", "content": [{"type": "text", "text": MARK}]}
    assert redacted["note"] == MARK
    assert store.verify().ok


@pytest.mark.parametrize(
    ("event_id", "path", "field"),
    [  # the first five were accepted, and the SDK could no longer load the event (issue 26)
        ("u1", "/llm_message/role", "role"),
        ("u1", "/llm_message/content/0/type", "type"),
        ("a1", "/tool_name", "tool_name"),
        ("a1", "/action/kind", "kind"),
        ("o1", "/observation/kind", "kind"),
        ("o1", "/observation/content/0/type", "type"),
        ("o1", "/action_id", "action_id"),
        ("o1", "/tool_call_id", "tool_call_id"),
    ],
)
def test_a_path_that_carries_structure_is_refused_and_changes_nothing(
    store: EventStore, event_id: str, path: str, field: str
) -> None:
    _with_secrets(store)
    before = _everything(store)
    with pytest.raises(UnredactablePathError, match=re.escape(path)) as caught:
        store.redact("c", event_id, reason="r", paths=[path])
    assert (caught.value.event_id, caught.value.path, caught.value.field) == (event_id, path, field)
    assert _everything(store) == before
    assert store.redactions("c") == []


@pytest.mark.parametrize(
    ("paths", "message_"),
    [
        (["/tool_call_id"], "part of the envelope"),
        (["/kind"], "part of the envelope"),
        (["/nope"], "has no value at /nope"),
        (["observation"], "must be a JSON Pointer"),
        (["/"], "must be a JSON Pointer"),
        ([], "at least one JSON Pointer"),
    ],
)
def test_bad_redactions_are_refused_and_change_nothing(
    store: EventStore, paths: list[str], message_: str
) -> None:
    _with_secrets(store)
    before = _everything(store)
    with pytest.raises(InvalidArgumentError, match=message_):
        store.redact("c", "o1", reason="r", paths=paths)
    assert _everything(store) == before


def test_redaction_errors(store: EventStore) -> None:
    _with_secrets(store)
    with pytest.raises(ConversationNotFoundError):
        store.redact("nope", "u1", reason="r")
    with pytest.raises(InvalidArgumentError, match="has no event 'zz'"):
        store.redact("c", "zz", reason="r")
    with pytest.raises(InvalidArgumentError, match="reason"):
        store.redact("c", "u1", reason=" ")
    store.redact("c", "u1", reason="r")
    with pytest.raises(InvalidArgumentError, match="nothing left to redact"):
        store.redact("c", "u1", reason="again")
    assert len(store.redactions("c")) == 1


def test_a_condensation_summary_is_redacted_in_its_copies(store: EventStore) -> None:
    store.append("c", condensed_history())
    (cond,) = [e for e in store.events("c") if e.kind == "Condensation"]
    summary = json.loads(cond.payload_json)["summary"]
    assert summary and summary in _everything(store)
    before = triple(store.view("c"))
    store.redact("c", cond.event_id, reason="the summary quoted a secret")
    assert summary not in _everything(store)
    assert triple(store.view("c")) == before
    assert store.condensations("c")[0].summary == MARK
    assert store.verify().ok


def test_tampering_after_redactions_is_found_at_its_seq(store: EventStore) -> None:
    _with_secrets(store)
    store.redact("c", "u1", reason="r1")
    store.redact("c", "o1", reason="r2", paths=None)
    assert store.verify().ok
    cases = {
        "UPDATE events SET payload = replace(payload, 'thanks', 'thank') WHERE seq = 4": 4,
        f"UPDATE events SET payload = replace(payload, '{MARK}', 'x') WHERE seq = 1": 1,
        # One hex digit changed, whichever it was.
        "UPDATE events SET hash = CASE WHEN substr(hash, 1, 1) = '0' THEN '1' ELSE '0' END "
        "|| substr(hash, 2) WHERE seq = 3": 3,
    }
    for statement, seq in cases.items():
        with store.engine.begin() as conn, guard_off(conn):
            original = conn.execute(
                text("SELECT payload, hash FROM events WHERE seq = :s"), {"s": seq}
            ).one()
            conn.execute(text(statement))
        problems = store.verify("c").problems
        assert problems and f"seq {seq}" in problems[0], (statement, problems)
        with store.engine.begin() as conn, guard_off(conn):
            conn.execute(
                text("UPDATE events SET payload = :p, hash = :h WHERE seq = :s"),
                {"p": original.payload, "h": original.hash, "s": seq},
            )
        assert store.verify().ok


def test_a_forged_redaction_record_is_found(store: EventStore) -> None:
    _with_secrets(store)
    store.redact("c", "u1", reason="the real reason")
    with store.engine.begin() as conn, pytest.raises(Exception, match="append-only"):
        conn.execute(text("UPDATE redactions SET reason = 'forged'"))
    with store.engine.begin() as conn, pytest.raises(Exception, match="append-only"):
        conn.execute(text("DELETE FROM redactions"))
    for statement in (  # only under a record may a payload change, and nothing else may
        "UPDATE events SET payload = '{}' WHERE seq = 4",
        "UPDATE events SET hash = 'x' WHERE seq = 1",
        "UPDATE events SET kind = 'x' WHERE seq = 1",
    ):
        with store.engine.begin() as conn, pytest.raises(Exception, match="append-only"):
            conn.execute(text(statement))
    assert store.verify().ok


def test_redacting_a_broken_link_is_refused(store: EventStore) -> None:
    _with_secrets(store)
    with store.engine.begin() as conn, guard_off(conn):
        conn.execute(
            text("UPDATE events SET payload = replace(payload, 'thanks', 'thank') WHERE seq = 4")
        )
    with pytest.raises(ChainMismatchError, match="seq 4"):
        store.redact("c", "m2", reason="r")
    assert store.redactions("c") == []


def test_a_keyed_store_keys_its_records(db_url: str, store_class: Any) -> None:
    with store_class(db_url, chain_key="k1") as store:
        store.create_schema()
        _with_secrets(store)
        store.redact("c", "u1", reason="r")
        assert store.verify().ok
    with store_class(db_url, chain_key="other") as stranger:
        assert not stranger.verify().ok
        with pytest.raises(ChainMismatchError, match="chain key"):
            stranger.redact("c", "m2", reason="r")


def test_forks_share_the_redaction(store: EventStore) -> None:
    _with_secrets(store)
    store.fork("c", 3, "f")
    store.append("f", [message("f4")])
    store.fork("f", 4, "g")
    store.redact("g", "u1", reason="through a fork")  # the event is c's: redacted there
    for cid in ("c", "f", "g"):
        assert SECRET not in store.view(cid).events[0].payload_json, cid
        assert store.verify(cid).ok
        assert [r.conversation_id for r in store.redactions(cid)] == ["c"]
    assert SECRET not in _everything(store)


def test_appends_go_on_while_redacting(store: EventStore) -> None:
    _with_secrets(store)

    def append(other: EventStore, i: int) -> None:
        other.append("c", [message(f"w{i}", f"{SECRET} {i}")])
        other.append("d", [message(f"d{i}")])

    with appending_meanwhile(store, append, 150):
        for i in range(20):
            deadline = time.monotonic() + 30
            while f"w{i}" not in {e.event_id for e in store.events("c")}:
                assert time.monotonic() < deadline
                time.sleep(0.001)
            store.redact("c", f"w{i}", reason="rolling")
    assert store.verify().ok
    assert len(store.redactions("c")) == 20


def test_erase_takes_the_records_with_it(store: EventStore) -> None:
    _with_secrets(store)
    store.redact("c", "u1", reason="r")
    store.erase("c", reason="gone")
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM redactions")).scalar_one() == 0
