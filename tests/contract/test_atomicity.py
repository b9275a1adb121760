"""Failure atomicity: an append that fails anywhere leaves the database exactly as it was
(every row of every table compared), raises a clear error, and the store keeps working."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from viewstore import (
    ConcurrencyError,
    DuplicateEventError,
    EventStore,
    InvalidEventError,
    ViewstoreError,
)
from viewstore.domain import projector
from viewstore.store.append import rows

from ..store._helpers import A, C, M, O, Payload, R, S, U, dump

CID = "conv"


class Injected(RuntimeError):
    """The failure a test injects into the middle of an append."""


@pytest.fixture
def seeded(store: EventStore) -> EventStore:
    """A conversation with a condensation, an open request and a pending tool call."""
    store.append(
        CID,
        [S(), U("u1"), A("a1", "t1", "r1"), O("o1", "t1"), M("m1")],
    )
    store.append(CID, [C("c1", ["u1"], "summary", 1), R("req"), A("a2", "t2", "r2")])
    return store


def still_works(store: EventStore) -> None:
    """The batch that failed (now without its fault) goes through, and the store verifies."""
    version = store.version(CID)
    result = store.append(CID, a_batch(), expected_version=version)
    assert result.version == version + 4
    assert result.appended == ["o2", "u2", "c2", "m2"]
    assert store.view(CID).event_ids == ["c2-summary", "S", "a1", "o1", "a2", "o2", "u2", "m2"]
    assert store.verify().ok


def a_batch() -> list[Payload]:
    """A valid batch with a condensation in it, so every write path is exercised."""
    return [
        O("o2", "t2"),
        U("u2"),
        C("c2", ["m1", "c1-summary"], "newer summary", 0),
        M("m2"),
    ]


def test_bad_event_at_the_end_of_a_batch(seeded: EventStore) -> None:
    before = dump(seeded.engine)
    bad = {"id": "bad", "kind": "ActionEvent", "source": "agent"}  # no tool_call_id
    with pytest.raises(InvalidEventError) as caught:
        seeded.append(CID, [*a_batch(), bad])
    assert caught.value.index == 4
    assert caught.value.field == "tool_call_id"
    assert dump(seeded.engine) == before
    still_works(seeded)


def test_duplicate_in_the_middle_of_a_batch(seeded: EventStore) -> None:
    before = dump(seeded.engine)
    batch = a_batch()
    batch.insert(2, M("m1", "a different text for a stored id"))
    with pytest.raises(DuplicateEventError) as caught:
        seeded.append(CID, batch)
    assert caught.value.event_id == "m1"
    assert dump(seeded.engine) == before
    still_works(seeded)


def test_concurrency_error_writes_nothing(seeded: EventStore) -> None:
    before = dump(seeded.engine)
    with pytest.raises(ConcurrencyError):
        seeded.append(CID, a_batch(), expected_version=3)
    assert dump(seeded.engine) == before
    still_works(seeded)


def test_a_new_conversation_is_not_created_by_a_failed_append(seeded: EventStore) -> None:
    before = dump(seeded.engine)
    with pytest.raises(InvalidEventError):
        seeded.append("other", [S(), U("u1"), {"kind": "MessageEvent"}])
    assert dump(seeded.engine) == before
    assert seeded.conversation_ids() == [CID]


def _after(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original``, then a failure: the rows it wrote are in the open transaction."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        original(*args, **kwargs)
        raise Injected("injected after a partial write")

    return broken


def _instead(*args: Any, **kwargs: Any) -> Any:
    raise Injected("injected in the projector")


Fault = tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]
FAULTS: dict[str, Fault] = {
    "project": (projector, "project", lambda original: _instead),  # events already inserted
    "insert_events": (rows, "insert_events", _after),
    "write_projection": (rows, "write_projection", _after),
    "insert_condensations": (rows, "insert_condensations", _after),
    "save_state": (rows, "save_state", _after),  # the last write before commit
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("new_conversation", [False, True], ids=["existing", "new"])
def test_failure_injected_inside_the_append(
    seeded: EventStore, monkeypatch: pytest.MonkeyPatch, fault: str, new_conversation: bool
) -> None:
    module, name, make = FAULTS[fault]
    cid = "fresh" if new_conversation else CID
    batch = [S(), U("u1"), M("m1"), *a_batch()[1:]] if new_conversation else a_batch()
    before = dump(seeded.engine)
    monkeypatch.setattr(module, name, make(getattr(module, name)))
    with pytest.raises((Injected, ViewstoreError)):
        seeded.append(cid, batch)
    monkeypatch.undo()
    assert dump(seeded.engine) == before
    assert seeded.conversation_ids() == [CID]
    # The very batch that failed goes through once the fault is gone.
    result = seeded.append(cid, batch)
    assert result.appended == [p["id"] for p in batch]
    assert seeded.verify().ok


def test_database_error_mid_append_is_translated(
    seeded: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver error inside the transaction surfaces as a ViewstoreError, nothing written."""
    from sqlalchemy import text  # noqa: PLC0415

    original = rows.write_projection

    def failing(conn: Any, *args: Any, **kwargs: Any) -> None:
        original(conn, *args, **kwargs)
        conn.execute(text("SELECT * FROM no_such_table"))

    before = dump(seeded.engine)
    monkeypatch.setattr(rows, "write_projection", failing)
    with pytest.raises(ViewstoreError) as caught:
        seeded.append(CID, a_batch())
    assert caught.value.__cause__ is not None  # the driver error, kept as the cause
    monkeypatch.undo()
    assert dump(seeded.engine) == before
    still_works(seeded)
