"""View rows name their event, read from the log by its primary key (a summary's from the row):
the Events rebuilt from them are the pure engine's, field for field; they are built lazily; and
verify() catches a row that reads something else than the log says (a copy written into it, a
fork's row pointed at another log)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore, Role, SchemaError, StorageError, StoredView
from viewstore.domain.projector import ViewEntry
from viewstore.store.append import rows
from viewstore.store.read import stored_events
from viewstore.store.read.stored_events import StoredEvents

from ..store._helpers import A, C, M, O, R, S, U, Vector, X, load_vectors, view_row_of

CID = "conv"
TIMESTAMP = "2026-01-02T03:04:05.678901"


def rich_history() -> list[dict[str, Any]]:
    """Every envelope field set somewhere: timestamps, parent ids, a thinking action, a summary
    of a condensation without a source (its summary's source is then "environment")."""
    events = [
        S(),
        {**U("u1"), "timestamp": TIMESTAMP},
        {**A("a1", "t1", "r1", thinking=True), "parent_id": "u1", "timestamp": TIMESTAMP},
        {**O("o1", "t1"), "parent_id": "a1"},
        X("x1"),
        M("m1"),
        R("req"),
    ]
    condensation = C("c1", ["u1", "a1", "o1"], "what happened", 1)
    del condensation["source"]
    return [*events, {**condensation, "timestamp": TIMESTAMP}, U("u2")]


def assert_same_as_replay(store: EventStore, key: str, as_of: int | None = None) -> None:
    stored = store.view(key, as_of=as_of)
    replayed = store.replay(key, as_of=as_of)
    assert stored.events == replayed.events, (key, as_of)
    assert stored.payloads == [event.payload_json for event in replayed.events]
    assert stored.event_ids == replayed.event_ids
    assert stored == replayed


# --------------------------------------------------------------------------- same as replay


def test_stored_events_equal_the_pure_engines(store: EventStore) -> None:
    history = rich_history()
    store.append(CID, history)
    for seq in (None, *range(len(history) + 1)):
        assert_same_as_replay(store, CID, seq)
    view = store.view(CID)
    assert view.event_ids == ["S", "c1-summary", "m1", "u2"]
    summary = view.events[1]
    assert (summary.source, summary.timestamp, summary.parent_id) == (
        "environment",
        TIMESTAMP,
        None,
    )
    assert summary.summary == "what happened"
    assert json.loads(view.payloads[1])["summary"] == "what happened"


def test_an_appended_summary_event_keeps_its_summary(store: EventStore) -> None:
    appended = {
        "id": "s1",
        "source": "environment",
        "summary": "earlier",
        "kind": "CondensationSummaryEvent",
    }
    store.append(CID, [S(), appended])
    assert store.view(CID).events[1].summary == "earlier"
    assert_same_as_replay(store, CID)


def test_vectors_read_back_as_the_pure_engine_builds_them(
    store: EventStore, vectors_dir: Path, sweep_step: int
) -> None:
    """Real SDK events (timestamps, parent ids, summaries): views now and as of a few seqs."""
    rng = random.Random(3)
    vectors: list[Vector] = load_vectors(vectors_dir, "micro") + load_vectors(vectors_dir, "cases")
    for vector in vectors[::sweep_step]:
        if not vector.lines:
            continue
        store.append(vector.name, vector.lines)
        n = len(vector.lines)
        for seq in {None, n // 2, rng.randint(0, n)}:
            assert_same_as_replay(store, vector.name, seq)


# --------------------------------------------------------------------------- lazy events


def read_rich(store: EventStore) -> StoredView:
    store.append(CID, rich_history())
    return store.view(CID)


def test_events_are_a_read_only_sequence(store: EventStore) -> None:
    view = read_rich(store)
    events = view.events
    expected = store.replay(CID).events
    assert isinstance(events, StoredEvents)
    assert len(events) == 4
    assert list(events) == expected
    assert events == expected and expected == events
    assert events == tuple(expected)
    assert events == store.view(CID).events  # another read's
    assert events != expected[:3] and events != [*expected[:3], expected[0]]
    assert events != "S"
    assert events != None  # noqa: E711 - the comparison is what is tested
    assert events[0] == expected[0] and events[-1] == expected[-1]
    assert events[1:3] == expected[1:3] and events[::-1] == expected[::-1]
    assert events[10:] == []
    with pytest.raises(IndexError):
        events[4]
    assert expected[2] in events and events.index(expected[2]) == 2
    assert repr(events) == f"StoredEvents({expected!r})"
    with pytest.raises(TypeError):
        hash(events)
    with pytest.raises(TypeError):
        events[0] = expected[0]  # type: ignore[index]


def test_each_event_is_built_once_and_only_when_read(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    build = stored_events.event_from_row

    def counting(row: Any) -> Any:
        event = build(row)
        built.append(event.id)
        return event

    monkeypatch.setattr(stored_events, "event_from_row", counting)
    view = read_rich(store)
    assert view.event_ids == ["S", "c1-summary", "m1", "u2"]
    assert len(view.payloads) == 4
    assert view.to_dict()["event_ids"] == view.event_ids
    assert built == []
    first = view.events[2]
    assert view.events[2] is first and view.events[-2] is first
    assert built == ["m1"]
    assert [event.id for event in view.events] == view.event_ids
    assert list(view.events)[2] is first
    assert built == ["m1", "S", "c1-summary", "u2"]


def test_views_computed_by_the_pure_engine_keep_plain_lists(store: EventStore) -> None:
    store.append(CID, rich_history())
    replayed = store.replay(CID)
    assert isinstance(replayed.events, list)
    assert replayed.payloads == store.view(CID).payloads
    assert replayed.event_ids == store.view(CID).event_ids


# --------------------------------------------------------------------------- copies


def test_entries_loaded_for_a_condensation_carry_no_copies(store: EventStore) -> None:
    store.append(CID, rich_history())
    with store.engine.connect() as conn:
        loaded = rows.load_current_view(conn, CID)
    assert [entry.id for entry in loaded] == ["S", "c1-summary", "m1", "u2"]
    assert all(entry.payload is None for entry in loaded)
    assert [entry.is_summary for entry in loaded] == [False, True, False, False]
    with pytest.raises(ValueError, match="no payload"):
        rows.entry_params(CID, loaded[0])


def test_a_condensation_keeps_every_copy_intact(store: EventStore) -> None:
    store.append(CID, rich_history())
    store.append(CID, [A("a2", "t2", "r2"), O("o2", "t2"), C("c2", ["m1", "a2"], "again", 0)])
    assert store.view(CID).event_ids == ["c2-summary", "S", "c1-summary", "u2", "o2"]
    assert_same_as_replay(store, CID)
    assert store.verify(CID).ok


# (column, SQL assignment, event id, who reads that copy: the store's view read, the analyst
# views, or so far nobody but verify)
# An event's row holds no copy of its payload (revision 0022): a read takes the log's. One
# written into it is read instead (a store migrating keeps its copies until they are NULLed),
# so verify compares it too.
FORGED_COPY = (
    "payload = (SELECT replace(e.payload, 'done', 'rm -rf /') FROM events e "
    "WHERE e.conversation_id = view_entries.conversation_id AND e.seq = view_entries.seq)"
)
COPY_TAMPERS = [
    ("payload", FORGED_COPY, "m1", "read"),
    ("payload", "payload = replace(payload, 'what happened', 'nothing')", "c1-summary", "read"),
    ("source", "source = 'user'", "m1", "analysts"),
    ("timestamp", f"timestamp = '{TIMESTAMP}'", "m1", "analysts"),
    ("parent_id", "parent_id = 'u2'", "m1", "verify"),
]


def attention_window(store: EventStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        found = conn.execute(text("SELECT * FROM attention_window ORDER BY position"))
        return [tuple(row) for row in found]


@pytest.mark.parametrize(
    ("column", "assignment", "event_id", "reader"),
    COPY_TAMPERS,
    ids=[f"{t[0]}-of-{t[2]}" for t in COPY_TAMPERS],
)
def test_verify_finds_a_copy_that_differs_from_the_log(
    store: EventStore, column: str, assignment: str, event_id: str, reader: str
) -> None:
    store.append(CID, rich_history())
    store.append("other", [S(), U("u1")])
    before, window = store.view(CID), attention_window(store)
    with store.engine.begin() as conn:
        changed = conn.execute(
            text(
                f"UPDATE view_entries SET {assignment} WHERE {view_row_of(event_id)} "
                "AND conversation_id = :c"
            ),
            {"c": CID},
        )
        assert changed.rowcount == 1
    # What this copy feeds now differs: exactly what verify must notice.
    if reader == "read":
        assert store.view(CID) != before
    elif reader == "analysts":
        assert attention_window(store) != window
    report = store.verify()
    assert not report.ok
    (problem,) = report.problems
    assert problem.startswith(f"{CID}: 1 view rows read an event that differs")
    assert repr(event_id) in problem and problem.endswith(f": {column})")
    assert store.verify("other").ok
    store.rebuild(CID)
    assert store.verify().ok
    assert store.view(CID) == before


@pytest.mark.parametrize("event_id", ["m1", "a1", "c1-summary"])
def test_an_envelope_written_into_a_row_is_not_read(store: EventStore, event_id: str) -> None:
    """Revision 0023: a read builds each Event from the row's id and its payload, so the
    envelope column (NULL since) feeds nothing: one written there changes no read and no
    replay comparison."""
    store.append(CID, rich_history())
    before, window = store.view(CID), attention_window(store)
    built = list(before.events)
    forged = "x" + chr(31) + '["MessageEvent","message","user",null,null,null,null,false]'
    with store.engine.begin() as conn:
        assert (
            conn.execute(
                text("SELECT count(*) FROM view_entries WHERE envelope IS NOT NULL")
            ).scalar_one()
            == 0
        )
        changed = conn.execute(
            text(f"UPDATE view_entries SET envelope = :f WHERE {view_row_of(event_id)}"),
            {"f": forged},
        )
        assert changed.rowcount == 1
    after = store.view(CID)
    assert after == before and list(after.events) == built
    assert attention_window(store) == window
    assert store.verify().ok
    assert_same_as_replay(store, CID)


def test_verify_finds_a_fork_row_that_reads_another_log(store: EventStore) -> None:
    """A fork's copied row names the log holding its event (revision 0022): pointed at another
    conversation's log, the fork's view reads that one's event at the seq, and verify says
    so; a rebuild names the right log again."""
    store.append(CID, rich_history())
    store.append("other", [S(), U("u-other"), M("m-other")])
    store.fork(CID, 6, "fork")
    before = store.view("fork")
    assert store.verify().ok
    with store.engine.begin() as conn:
        changed = conn.execute(
            text(
                "UPDATE view_entries SET holder = 'other' WHERE conversation_id = 'fork' "
                "AND seq = 2 AND NOT is_summary"
            )
        )
        assert changed.rowcount == 1
    assert store.view("fork").events.payloads() != before.events.payloads()
    (problem,) = store.verify().problems
    # The row's event id is read from the log it names too (revision 0026): the row itself
    # differs from replay, not only the event it reads.
    assert problem.startswith("fork: 1 view rows differ from replay (first: event 'u1'")
    store.rebuild("fork")
    assert store.verify().ok
    assert store.view("fork") == before


def test_a_row_that_is_wrong_beyond_its_copies_is_named_as_such(store: EventStore) -> None:
    store.append(CID, rich_history())
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE view_entries SET kind = 'Forged', payload = '{}' "
                f"WHERE {view_row_of('m1')}"
            )
        )
    (problem,) = store.verify().problems
    assert "1 view rows differ from replay (first: event 'm1'" in problem


def test_entry_params_write_every_column() -> None:
    from viewstore.store.database.schema import view_entries  # noqa: PLC0415

    entry = ViewEntry(
        order_key="k",
        id="e",
        seq=1,
        kind="MessageEvent",
        role=Role.MESSAGE,
        tool_call_id=None,
        llm_response_id=None,
        thinking=False,
        entered_seq=1,
        payload="{}",
    )
    assert set(rows.entry_params(CID, entry)) == set(view_entries.c.keys())


# --------------------------------------------------------------------------- driver errors


def test_a_read_without_the_schema_is_a_schema_error(db_url: str, store_class: Any) -> None:
    with store_class(db_url) as store:
        store.create_schema()
        store.append(CID, [S(), U("u1")])
        with store.engine.begin() as conn:
            conn.execute(text("DROP VIEW attention_window"))
            conn.execute(text("DROP VIEW view_history"))
            conn.execute(text("DROP TABLE view_entries"))
        with pytest.raises(SchemaError):
            store.view(CID)


@pytest.mark.postgres
@pytest.mark.sync_only  # finds the store's pooled connection through store.engine
def test_a_connection_dropped_under_a_read_is_replaced(fresh_pg_url: str) -> None:
    with EventStore(fresh_pg_url) as store:
        store.create_schema()
        store.append(CID, [S(), U("u1")])
        with store.engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        killer = EventStore(fresh_pg_url)
        with killer.engine.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        killer.close()
        with pytest.raises(StorageError):
            # The pooled connection is the dead one: the first statement of the read fails
            # (before the view query when the BEGIN goes first; both are translated).
            store.view(CID)
        assert store.view(CID).event_ids == ["S", "u1"]


def test_sqlite_reads_the_current_view_off_its_partial_index(
    sqlite_url: str, store_class: Any
) -> None:
    """One range scan of ix_view_entries_current, in key order, each row's event found by the
    log's primary key: no scan of the log, no sort."""
    from viewstore.store.read import reads  # noqa: PLC0415

    with store_class(sqlite_url) as store:
        store.create_schema()
        store.append(CID, rich_history())
        with store.engine.connect() as conn:
            plan = conn.exec_driver_sql(
                "EXPLAIN QUERY PLAN " + reads._VIEW_ENTRIES["sqlite", False][0], {"c": CID}
            ).all()
        view_step, log_step = [row[-1] for row in plan]
        assert "USING INDEX ix_view_entries_current" in view_step, plan
        assert log_step.startswith("SEARCH e USING") and "(conversation_id=? AND seq=?)" in log_step
