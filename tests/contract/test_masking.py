"""Masking before storing (``EventStore(masking=...)``, docs/masking.md): a secret in an event's
content is replaced by ``[masked:RULE]`` before the event is hashed and stored, a record beside
it says which strings and rules, ``verify`` checks the record against the chain, the
structural fields are never touched, and a retry of the same events is a no-op. On SQLite,
PostgreSQL and partitioned PostgreSQL, through the blocking and the asyncio store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from viewstore import EventStore, InvalidArgumentError, MaskingRules, MaskRecord

from ..ops._helpers import action, condensed_history, message, observation

KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2
GITHUB = "ghp_" + "x" * 36
RULES = MaskingRules.from_toml(
    """
use = ["common"]

[[rules]]
name = "ticket"
pattern = 'TCK-[0-9]{6}'
paths = ["/observation/content/*/text"]
kinds = ["ObservationEvent"]
"""
)


@pytest.fixture
def masked_store(db_url: str, store_class: Any) -> Iterator[EventStore]:
    with store_class(db_url, masking=RULES) as opened:
        opened.create_schema()
        yield opened


def _payload(store: EventStore, conversation: str, seq: int) -> dict[str, Any]:
    return json.loads(store.events(conversation)[seq - 1].payload_json)


def _tool_output(eid: str, body: str) -> dict[str, Any]:
    event = observation(eid)
    event["observation"]["content"][0]["text"] = body
    return event


def test_a_secret_is_masked_before_it_is_stored_and_the_record_says_where(
    masked_store: EventStore,
) -> None:
    masked_store.append("c", [message("m1", f"key {KEY} and {KEY}; token {GITHUB}"), message("m2")])

    stored = _payload(masked_store, "c", 1)
    assert stored["llm_message"]["content"][0]["text"] == (
        "key [masked:llm-api-key] and [masked:llm-api-key]; token [masked:github-token]"
    )
    assert KEY not in json.dumps(masked_store.events("c")[0].payload)
    [record] = masked_store.masks("c")
    assert isinstance(record, MaskRecord)
    assert (record.seq, record.event_id) == (1, "m1")
    assert [(m.path, m.rule, m.count) for m in record.masked] == [
        ("/llm_message/content/0/text", "llm-api-key", 2),
        ("/llm_message/content/0/text", "github-token", 1),
    ]
    view = masked_store.view("c")
    assert view.event_ids == ["m1", "m2"]
    assert "[masked:llm-api-key]" in view.events[0].payload_json
    assert masked_store.verify().ok


def test_events_with_nothing_to_mask_are_stored_as_given_without_a_record(
    masked_store: EventStore,
) -> None:
    event = message("m1", "nothing secret here: sk-short")
    masked_store.append("c", [event])
    masked_store.append("c", [message("m2")])
    assert masked_store.masks("c") == []
    assert _payload(masked_store, "c", 1) == event


def test_a_retry_of_masked_events_is_a_no_op(masked_store: EventStore) -> None:
    batch = [message("m1", f"key {KEY}"), message("m2", "plain")]
    masked_store.append("c", batch, expected_version=0)
    again = masked_store.append("c", batch, expected_version=0)
    assert again.duplicates == ["m1", "m2"] and again.version == 2
    again = masked_store.append("c", batch)
    assert again.duplicates == ["m1", "m2"]
    assert [r.seq for r in masked_store.masks("c")] == [1]
    assert masked_store.verify().ok


def test_paths_and_kinds_limit_a_rule(masked_store: EventStore) -> None:
    masked_store.append(
        "c",
        [
            message("m1", "TCK-123456 in a message stays"),
            action("a1"),
            _tool_output("o1", "ticket TCK-123456 done"),
        ],
    )
    assert _payload(masked_store, "c", 1)["llm_message"]["content"][0]["text"].startswith(
        "TCK-123456"
    )
    assert _payload(masked_store, "c", 3)["observation"]["content"][0]["text"] == (
        "ticket [masked:ticket] done"
    )
    assert [(r.seq, r.masked[0].rule) for r in masked_store.masks("c")] == [(3, "ticket")]


def test_the_fields_the_view_and_the_sdk_read_are_never_masked(
    masked_store: EventStore,
) -> None:
    # A secret-shaped id, tool name and tool-call id: structure, kept as they are.
    odd = "sk-ant-" + "z" * 30
    event = action("a1", tool_call_id=odd, llm_response_id=odd)
    event["thought"] = [{"type": "text", "text": f"use {KEY}"}]
    masked_store.append("c", [message(odd, "hi"), event, observation("o1", odd, "a1")])
    stored = _payload(masked_store, "c", 2)
    assert (stored["tool_call_id"], stored["llm_response_id"]) == (odd, odd)
    assert stored["thought"][0]["text"] == "use [masked:llm-api-key]"
    assert masked_store.view("c").event_ids == [odd, "a1", "o1"]
    assert masked_store.verify().ok


def test_tool_call_arguments_stay_json(masked_store: EventStore) -> None:
    event = action("a1")
    arguments = json.dumps({"command": f"curl -H 'Authorization: Bearer {KEY}' x"})
    event["tool_call"] = {
        "id": "tc1",
        "name": "terminal",
        "arguments": arguments,
        "origin": "completion",
    }
    masked_store.append("c", [message("m1"), event])
    stored = _payload(masked_store, "c", 2)["tool_call"]["arguments"]
    assert KEY not in stored
    assert json.loads(stored)["command"] == "curl -H 'Authorization: Bearer [masked:llm-api-key]' x"


def test_a_match_that_crosses_json_syntax_masks_inside_the_json() -> None:
    rules = MaskingRules.from_toml(
        """
[[rules]]
name = "password"
pattern = 'password[^,}]*'
"""
    )
    event = action("a1")
    event["tool_call"] = {
        "id": "tc1",
        "name": "terminal",
        "arguments": json.dumps({"command": "login", "password": "hunter2"}),
        "origin": "completion",
    }
    from viewstore import parse_event  # noqa: PLC0415

    masked, found = rules.mask(parse_event(event))
    arguments = json.loads(json.loads(masked.payload_json)["tool_call"]["arguments"])
    assert arguments == {"command": "login", "password": "[masked:password]"}
    assert [(m.path, m.rule, m.count) for m in found] == [("/tool_call/arguments", "password", 1)]


def test_forks_and_as_of_views_keep_the_masked_content(masked_store: EventStore) -> None:
    masked_store.append("c", [message("m1", f"key {KEY}"), message("m2")])
    masked_store.fork("c", 2, "f")
    masked_store.append("f", [message("f3", f"again {KEY}")])
    assert [(r.conversation_id, r.seq) for r in masked_store.masks("f")] == [("c", 1), ("f", 3)]
    assert KEY not in masked_store.view("f").events[2].payload_json
    assert KEY not in masked_store.view("c", as_of=1).events[0].payload_json
    assert masked_store.verify().ok


def test_erasing_a_conversation_takes_its_records(masked_store: EventStore) -> None:
    masked_store.append("c", [message("m1", f"key {KEY}")])
    masked_store.erase("c", reason="test")
    with masked_store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM masks")).scalar() == 0


def test_a_redaction_of_a_masked_event_still_verifies(masked_store: EventStore) -> None:
    masked_store.append("c", [message("m1", f"key {KEY}"), message("m2")])
    masked_store.redact("c", "m1", reason="whole message")
    assert masked_store.verify().ok
    assert len(masked_store.masks("c")) == 1


def test_a_store_without_rules_stores_secrets_as_given(store: EventStore) -> None:
    store.append("c", [message("m1", f"key {KEY}")])
    assert KEY in store.events("c")[0].payload_json
    assert store.masks("c") == []


@pytest.mark.sync_only
def test_an_append_in_the_callers_transaction_writes_its_records(
    masked_store: EventStore,
) -> None:
    with masked_store.begin() as conn:
        masked_store.append("c", [message("m1", f"key {KEY}")], connection=conn)
    assert [r.seq for r in masked_store.masks("c")] == [1]
    assert masked_store.verify().ok


@pytest.mark.sync_only
def test_the_rules_file_may_come_from_the_environment(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "masking.toml"
    rules.write_text('use = ["common"]\n')
    monkeypatch.setenv("VIEWSTORE_MASKING_RULES", str(rules))
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message("m1", f"key {KEY}")])
        assert len(store.masks("c")) == 1
    monkeypatch.setenv("VIEWSTORE_MASKING_RULES", str(tmp_path / "missing.toml"))
    with pytest.raises(InvalidArgumentError, match=r"cannot read the masking rules"):
        EventStore(db_url)


# -- what verify finds ---------------------------------------------------------------------


@contextmanager
def _masks_guard_off(conn: Connection) -> Iterator[None]:
    """The owner's way around the records' append-only guard."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE masks DISABLE TRIGGER USER"))
        yield
        conn.execute(text("ALTER TABLE masks ENABLE TRIGGER USER"))
        return
    stored = conn.execute(
        text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'masks'")
    ).all()
    assert len(stored) == 2
    for name, _ in stored:
        conn.execute(text(f"DROP TRIGGER {name}"))
    yield
    for _, sql in stored:
        conn.execute(text(sql))


def _problems(store: EventStore) -> list[str]:
    return [p for c in store.verify().conversations for p in c.problems]


@pytest.mark.sync_only
@pytest.mark.parametrize(
    ("statement", "found"),
    [
        ("UPDATE masks SET masked = replace(masked, :two, :one)", "altered"),
        ("UPDATE masks SET seq = 2", "names event 'm1', not the event there"),
        ("UPDATE masks SET event_id = 'm2', seq = 2", "altered or moved"),
        (f"UPDATE masks SET record_hash = '{'0' * 64}'", "altered or moved"),
    ],
)
def test_verify_finds_a_record_altered_or_moved(
    masked_store: EventStore, statement: str, found: str
) -> None:
    masked_store.append("c", [message("m1", f"{KEY} {KEY}"), message("m2")])
    assert masked_store.verify().ok
    with masked_store.engine.begin() as conn, _masks_guard_off(conn):
        conn.execute(text(statement), {"two": '"count":2', "one": '"count":1'})
    problems = _problems(masked_store)
    assert any(found in p for p in problems), problems


@pytest.mark.sync_only
def test_the_writer_cannot_change_or_delete_a_record(masked_store: EventStore) -> None:
    masked_store.append("c", [message("m1", f"key {KEY}")])
    for statement in ("UPDATE masks SET masked = '[]'", "DELETE FROM masks"):
        with pytest.raises(Exception, match="append-only"), masked_store.engine.begin() as conn:
            conn.execute(text(statement))
    assert masked_store.verify().ok


def test_many_events_in_one_batch_get_their_own_records(masked_store: EventStore) -> None:
    history = condensed_history()
    history[3] = message("m2", f"here {KEY}")
    history[6] = message("m3", f"and {GITHUB}")
    masked_store.append("c", history)
    assert [(r.seq, r.event_id) for r in masked_store.masks("c")] == [(4, "m2"), (7, "m3")]
    assert masked_store.view("c").event_ids == ["m1", "k1-summary", "m2", "m3"] or (
        masked_store.view("c").event_ids[0] == "m1"
    )
    assert masked_store.verify().ok
