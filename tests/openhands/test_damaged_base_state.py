"""A stored base state damaged outside viewstore (the row rewritten by someone who can write
the table): opening the conversation raises ``DamagedBaseStateError`` naming it, ``verify``
reports it, and the CLI commands that read it fail in one line."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

pytest.importorskip("openhands.sdk", reason="openhands.sdk is not importable")

from sqlalchemy import create_engine, update

from tests.cli._helpers import invoke, one_line_error
from tests.openhands._agent import make_agent
from viewstore import EventStore
from viewstore.domain.errors import DamagedBaseStateError, ViewstoreError
from viewstore.openhands import open_conversation
from viewstore.store.database.schema import base_states

DAMAGE = {
    "not JSON": '{"id": "5a3b1e00-0000-4000-8000-00000000',  # cut short
    "not an object": '["not", "a", "state"]',
}


def damage(url: str, cid: uuid.UUID, payload: str) -> None:
    """Rewrite the row as an owner could (no guard keeps this table)."""
    engine = create_engine(url)
    with engine.begin() as conn:
        changed = conn.execute(
            update(base_states)
            .where(base_states.c.conversation_id == cid.hex)
            .values(payload=payload)
        )
        assert changed.rowcount == 1
    engine.dispose()


@pytest.mark.parametrize("how", sorted(DAMAGE))
@pytest.mark.parametrize("behind", [False, True], ids=["current", "behind"])
def test_a_damaged_base_state_is_a_typed_error_and_a_verify_problem(
    db_url: str, tmp_path: Path, how: str, behind: bool
) -> None:
    cid = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        conversation = open_conversation(
            store, make_agent(1, "a"), tmp_path / "ws", cid, visualizer=None
        )
        conversation.send_message("Start.")
        assert store.verify().ok
        if behind:  # its writer died after an event: the read then catches the state up
            (last,) = store.events(cid)[-1:]
            extra = dict(last.payload, id=uuid.uuid4().hex, parent_id=last.event_id)
            store.append(cid, extra, expected_version=store.version(cid))
        damage(db_url, cid, DAMAGE[how])

        with pytest.raises(DamagedBaseStateError) as caught:
            open_conversation(store, make_agent(1, "b"), tmp_path / "ws", cid, visualizer=None)
        error = caught.value
        assert isinstance(error, ViewstoreError) and isinstance(error, ValueError)
        assert error.conversation_id == cid.hex and cid.hex in str(error)
        assert "base state" in str(error)

        report = store.verify()
        assert not report.ok
        (problem,) = report.problems
        assert problem.startswith(f"{cid.hex}: ") and "base state" in problem, problem
        assert ("not valid JSON" if how == "not JSON" else "not a JSON object") in problem

    # The CLI: verify lists it (exit 1); export, which reads it, fails in one line (exit 2).
    verified = invoke(db_url, "verify", cid.hex)
    assert verified.exit_code == 1 and "base state" in verified.output
    exported = invoke(db_url, "export", cid.hex, str(tmp_path / "out"))
    assert exported.exit_code == 2
    line = one_line_error(exported)
    assert cid.hex in line and "base state" in line, line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_sound_base_state_verifies(db_url: str, tmp_path: Path) -> None:
    cid = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        open_conversation(store, make_agent(1, "a"), tmp_path / "ws", cid, visualizer=None)
        state = store.base_state(cid)
        assert state is not None and json.loads(state.payload)["id"] == str(cid)
        assert store.verify().ok


def test_verify_checks_a_base_state_written_before_any_event(db_url: str) -> None:
    cid = uuid.uuid4()
    with EventStore(db_url) as store:
        store.create_schema()
        store.save_base_state(cid, json.dumps({"id": str(cid)}), at_version=0)
        assert store.verify().ok and store.verify().conversations == []
        damage(db_url, cid, "null")
        with pytest.raises(DamagedBaseStateError):
            store.base_state(cid)
        (problem,) = store.verify().problems
        assert problem == f"{cid.hex}: its stored base state is damaged: not a JSON object", problem
