"""The SQL recipes of the docs on both backends, and PostgreSQL's read-only role.

Each recipe is taken verbatim from docs/howto-sql-recipes.md (marker ``doc-test: recipe
NAME``) and run with SQLAlchemy ``text()`` on a store holding the demo conversation and the
SDK-written one; the results are checked against the store's own API.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url

from viewstore import EventStore
from viewstore.store.database.engine import normalize_url
from viewstore.store.database.roles import role_name

from ._helpers import OPENHANDS_HEX
from ._readme import blocks_of, recipes

RECIPES = recipes()
VIEWS = ("attention_window", "condensation_log", "view_history")
# A write is refused for lack of privilege, or (writing to a view) because it is not updatable.
REFUSED = "permission denied|not automatically updatable"


def run(store: EventStore, name: str, **params: Any) -> list[Any]:
    with store.engine.connect() as conn:
        return list(conn.execute(text(RECIPES[name]), params))


def test_every_recipe_is_checked() -> None:
    checked = {
        "attention_window",
        "condensation_forgot",
        "view_after_event",
        "long_views",
        "errors_per_window",
        "error_messages",
    }
    assert set(RECIPES) == checked
    assert len(RECIPES) >= 5


def test_attention_window(populated_store: EventStore) -> None:
    for key in ("demo", OPENHANDS_HEX):
        rows = run(populated_store, "attention_window", conversation_id=key)
        view = populated_store.view(key)
        assert [r.event_id for r in rows] == view.event_ids
        assert [r.position for r in rows] == list(range(len(view.event_ids)))
        assert [r.kind for r in rows] == [e.kind for e in view.events]
        assert [r.source for r in rows] == [e.source for e in view.events]


def test_condensation_forgot(populated_store: EventStore) -> None:
    rows = run(populated_store, "condensation_forgot", conversation_id="demo")
    events = populated_store.events("demo")
    [condensation] = [e for e in events if e.kind == "Condensation"]
    assert {r.condensation_event_id for r in rows} == {condensation.event_id}
    assert {r.condensation_seq for r in rows} == {condensation.seq}
    assert {r.summary_offset for r in rows} == {2}
    assert sorted(r.forgotten_event_id for r in rows) == sorted(
        condensation.payload["forgotten_event_ids"]
    )
    assert [r.forgotten_kind for r in rows] == [
        "ActionEvent",
        "ActionEvent",
        "ObservationEvent",
        "ObservationEvent",
    ]
    assert all(bool(r.was_in_view) for r in rows)
    assert run(populated_store, "condensation_forgot", conversation_id=OPENHANDS_HEX) == []


def test_view_after_event(populated_store: EventStore) -> None:
    for key in ("demo", OPENHANDS_HEX):
        for n in range(populated_store.version(key) + 1):
            rows = run(populated_store, "view_after_event", conversation_id=key, n=n)
            assert [r.event_id for r in rows] == populated_store.view(key, as_of=n).event_ids
            assert [r.position for r in rows] == list(range(len(rows)))


def test_long_views(populated_store: EventStore) -> None:
    sizes = {key: len(populated_store.view(key).event_ids) for key in ("demo", OPENHANDS_HEX)}
    assert sizes == {"demo": 9, OPENHANDS_HEX: 14}
    rows = run(populated_store, "long_views", n=10)
    assert [(r.conversation_id, r.view_length) for r in rows] == [(OPENHANDS_HEX, 14)]
    assert len(run(populated_store, "long_views", n=0)) == 2


def test_errors_per_window(populated_store: EventStore) -> None:
    rows = run(populated_store, "errors_per_window")
    assert [(r.conversation_id, r.events_in_view, r.agent_errors) for r in rows] == [
        ("demo", 9, 1),
        (OPENHANDS_HEX, 14, 0),
    ]
    [error] = run(populated_store, "error_messages")
    assert (error.conversation_id, error.position, error.tool) == ("demo", 5, "terminal")
    assert error.error == "Tool execution timed out after 120s."


def test_views_are_dropped_by_downgrade(db_url: str) -> None:
    from alembic import command  # noqa: PLC0415

    from viewstore.store.event_store import alembic_config  # noqa: PLC0415

    with EventStore(db_url) as store:
        store.create_schema()
        with store.engine.connect() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "base")
            conn.commit()
            for view in VIEWS:
                with pytest.raises(Exception, match=view):
                    conn.execute(text(f"SELECT * FROM {view}"))
                conn.rollback()
        store.create_schema()
        with store.engine.connect() as conn:
            for view in VIEWS:
                conn.execute(text(f"SELECT * FROM {view}")).all()


@pytest.mark.postgres
def test_reader_role_can_select_the_views_and_write_nothing(fresh_pg_url: str) -> None:
    [block] = blocks_of("postgres-reader")
    login = "viewstore_test_reader_" + secrets.token_hex(4)
    with EventStore(fresh_pg_url) as store:
        from viewstore.demo import run_demo  # noqa: PLC0415

        run_demo(store, "demo")
        with store.engine.connect() as conn:
            database = make_url(fresh_pg_url).database or ""
            code = block.code.replace("analyst", login)
            code = code.replace(role_name("reader", "agent_store"), role_name("reader", database))
            conn.execute(text(code))
            conn.commit()
    url = normalize_url(make_url(fresh_pg_url).set(username=login, password="change-me"))
    reader = create_engine(url)
    try:
        with reader.connect() as conn:
            assert conn.execute(text("SELECT current_user")).scalar() == login
            for view in VIEWS:
                conn.execute(text(f"SELECT * FROM {view}")).all()
            assert len(conn.execute(text(RECIPES["errors_per_window"])).all()) == 1
        writes = [
            "INSERT INTO conversations (id) VALUES ('x')",
            "UPDATE conversations SET version = 0",
            "DELETE FROM view_entries",
            "DELETE FROM manipulation_indices",
            "UPDATE condensations SET summary = NULL",
            "INSERT INTO condensation_forgotten (conversation_id) VALUES ('x')",
            "DELETE FROM attention_window",
            "UPDATE view_history SET kind = 'x'",
            "CREATE TABLE intruder (x int)",
        ]
        for statement in writes:
            with reader.connect() as conn, pytest.raises(Exception, match=REFUSED):
                conn.execute(text(statement))
        with EventStore(fresh_pg_url) as store:
            assert store.conversation_ids() == ["demo"]
            assert store.verify().ok
    finally:
        reader.dispose()
        _drop_role(fresh_pg_url, login)


def _drop_role(url: str, login: str) -> None:
    admin = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            _drop(conn, login)
    finally:
        admin.dispose()


def _drop(conn: Connection, login: str) -> None:
    conn.execute(text(f'DROP OWNED BY "{login}"'))
    conn.execute(text(f'DROP ROLE IF EXISTS "{login}"'))


# -- NUL in payloads ---------------------------------------------------------------------------
#
# Conversation "nul": a message whose text, a key and a list hold NUL, a tool call whose error
# holds NUL (in `error` and `tool_name`), another whose error holds the six characters
# `\u0000` (an escaped backslash: not a NUL, and kept as it is), and a condensation whose
# summary holds NUL. The views show each NUL as U+FFFD; the log keeps the exact payload.

NUL_TEXT = "before\x00after"
ESCAPED = "not a NUL: \\u0000 and \\\\\x00"  # a backslash, `u0000`; two backslashes and a NUL


def _call(eid: str, call: str) -> dict[str, Any]:
    return {
        "kind": "ActionEvent",
        "id": eid,
        "source": "agent",
        "tool_name": "terminal",
        "tool_call_id": call,
        "llm_response_id": f"r-{eid}",
        "thinking_blocks": [],
        "action": {"command": "ls\x00-la", "kind": "TerminalAction"},
    }


def _error(eid: str, call: str, tool: str, error: str) -> dict[str, Any]:
    return {
        "kind": "AgentErrorEvent",
        "id": eid,
        "source": "agent",
        "tool_name": tool,
        "tool_call_id": call,
        "error": error,
    }


NUL_EVENTS: list[dict[str, Any]] = [
    {
        "kind": "MessageEvent",
        "id": "m1",
        "source": "user",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": NUL_TEXT}]},
        "odd\x00key": ["\x00", "\\\x00"],
    },
    _call("a1", "t1"),
    _error("x1", "t1", "term\x00inal", "bad\x00thing"),
    _call("a2", "t2"),
    _error("x2", "t2", "terminal", ESCAPED),
    {"kind": "CondensationRequest", "id": "q1", "source": "environment"},
    {
        "kind": "Condensation",
        "id": "c1",
        "source": "environment",
        "forgotten_event_ids": ["a1", "x1"],
        "summary": "summed\x00up",
        "summary_offset": 1,
    },
]


def _without_nul(value: Any) -> Any:
    """What the views show of a JSON value: every NUL, in keys and strings, as U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_without_nul(item) for item in value]
    if isinstance(value, dict):
        return {_without_nul(key): _without_nul(item) for key, item in value.items()}
    return value


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


@pytest.fixture
def nul_store(populated_store: EventStore) -> EventStore:
    populated_store.append("nul", NUL_EVENTS)
    return populated_store


def test_every_recipe_works_whatever_the_payloads_hold(nul_store: EventStore) -> None:
    params = {"conversation_id": "nul", "n": 0}
    results = {name: run(nul_store, name, **params) for name in RECIPES}  # none raises
    view = nul_store.view("nul")
    assert [r.event_id for r in results["attention_window"]] == view.event_ids
    assert view.event_ids == ["m1", "c1-summary", "a2", "x2"]
    assert [r.forgotten_event_id for r in results["condensation_forgot"]] == ["a1", "x1"]
    assert [r.event_id for r in run(nul_store, "view_after_event", conversation_id="nul", n=3)] == [
        "m1",
        "a1",
        "x1",
    ]
    assert ("nul", 4) in [(r.conversation_id, r.view_length) for r in results["long_views"]]
    assert ("nul", 4, 1) in [
        (r.conversation_id, r.events_in_view, r.agent_errors) for r in results["errors_per_window"]
    ]
    errors = [(r.conversation_id, r.position, r.tool, r.error) for r in results["error_messages"]]
    assert ("nul", 3, "terminal", ESCAPED.replace("\x00", "\ufffd")) in errors
    assert ("demo", 5, "terminal", "Tool execution timed out after 120s.") in errors
    # x1 left the view with the condensation; as of event 3 its text reads whole, NUL as U+FFFD.
    with nul_store.engine.connect() as conn:
        [(tool, error)] = conn.execute(
            text(
                "SELECT payload ->> 'tool_name', payload ->> 'error' FROM view_history "
                "WHERE conversation_id = 'nul' AND event_id = 'x1'"
            )
        ).all()
    assert (tool, error) == ("term\ufffdinal", "bad\ufffdthing")


def test_the_views_show_each_payload_with_nul_as_u_fffd(nul_store: EventStore) -> None:
    exact = {e.event_id: e.payload for e in nul_store.events("nul")}
    exact["c1-summary"] = json.loads(nul_store.view("nul").payloads[1])
    assert "\x00" in exact["c1-summary"]["summary"]  # the API keeps the exact text
    with nul_store.engine.connect() as conn:
        for view, ids in (
            ("attention_window", {"m1", "c1-summary", "a2", "x2"}),
            ("view_history", {"m1", "a1", "x1", "a2", "x2", "c1-summary"}),
        ):
            rows = conn.execute(
                text(
                    f"SELECT event_id, payload, payload ->> 'id' AS id FROM {view} "
                    "WHERE conversation_id = 'nul'"
                )
            ).all()
            assert {r.event_id for r in rows} == ids
            for row in rows:
                assert row.id == row.event_id
                assert _json(row.payload) == _without_nul(exact[row.event_id]), row.event_id
        summary = conn.execute(
            text("SELECT summary FROM condensation_log WHERE conversation_id = 'nul'")
        ).scalars()
        assert set(summary) == {"summed\ufffdup"}
    # The log itself is untouched: every payload round-trips exactly.
    assert [e.payload for e in nul_store.events("nul")] == NUL_EVENTS
