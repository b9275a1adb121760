"""Compaction (``store.compact``, docs/retention.md): the content of every event that every
view has forgotten goes, its envelope, structure, numbers and hash stay, a record names the
policy; views, indices, request flags and resumes do not change; as-of views and the log show
``[compacted]`` where the content was; ``verify`` carries the chain across it and still finds
any other change; forks that hold an event keep it, forks into compacted history are refused.
On SQLite, PostgreSQL and partitioned PostgreSQL, through the blocking and the asyncio store.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import (
    CompactedHistoryError,
    CompactionReport,
    EventStore,
    InvalidArgumentError,
)
from viewstore.domain.scrub import COMPACTED, MARK

from ..ops._helpers import action, condensation, dump, guard_off, message
from ..store._helpers import triple

BIG = "line of a long tool output\n" * 200  # about 5 kB: its removal frees bytes
NOW = timedelta(0)


def _observation(eid: str, call: str, action_id: str, body: str = BIG) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "environment",
        "tool_name": "terminal",
        "tool_call_id": call,
        "action_id": action_id,
        "observation": {
            "content": [{"type": "text", "text": body}],
            "exit_code": 0,
            "kind": "TerminalObservation",
        },
        "kind": "ObservationEvent",
    }


def _history(store: EventStore, cid: str = "c") -> None:
    """seq 1 m1, 2 a1, 3 o1 (big), 4 a2, 5 o2 (big), 6 m2, 7 k1 (forgets a1 o1 a2 o2, summary
    at 1), 8 m3: the view is m1, k1's summary, m2, m3."""
    store.append(cid, [message("m1", "start")])
    store.append(cid, [action("a1", "t1"), _observation("o1", "t1", "a1")])
    store.append(cid, [action("a2", "t2", llm_response_id="r2"), _observation("o2", "t2", "a2")])
    store.append(cid, [message("m2", "next")])
    store.append(cid, [condensation("k1", ("a1", "o1", "a2", "o2"), summary="ran two", offset=1)])
    store.append(cid, [message("m3", "after")])


def _payload(store: EventStore, cid: str, event_id: str) -> str:
    (found,) = [e.payload_json for e in store.events(cid) if e.event_id == event_id]
    return found


def _states(store: EventStore, cid: str) -> Any:
    return (
        triple(store.view(cid)),
        [e.payload_json for e in store.view(cid).events],
        triple(store.resume_view(cid)),
        [triple(store.view(cid, as_of=seq)) for seq in range(1, store.view(cid).version + 1)],
    )


def test_compaction_removes_forgotten_content_and_keeps_every_view(store: EventStore) -> None:
    _history(store)
    before = _states(store, "c")
    original = json.loads(_payload(store, "c", "o1"))
    report = store.compact(older_than=NOW)
    assert isinstance(report, CompactionReport)
    assert (report.conversations, report.events, report.dry_run) == (1, 2, False)
    assert report.small == 2  # the two actions: their record would outweigh their content
    assert report.bytes_freed > 2 * (len(BIG) - 600)
    assert _states(store, "c") == before  # views, indices, flags, resume, every as-of
    compacted = json.loads(_payload(store, "c", "o1"))
    assert "line of a long tool output" not in json.dumps(compacted)
    # The envelope, the names the event is parsed by, numbers and shape stay.
    assert compacted["observation"]["content"][0]["text"] == COMPACTED
    assert compacted["observation"]["exit_code"] == 0
    for field in ("id", "kind", "source", "tool_call_id", "action_id", "tool_name"):
        assert compacted[field] == original[field]
    as_of = store.view("c", as_of=5)
    assert [e.id for e in as_of.events] == ["m1", "a1", "o1", "a2", "o2"]
    assert COMPACTED in as_of.events[2].payload_json  # a placeholder, not a gap
    records = store.redactions("c")
    assert [(r.event_id, r.compacted, r.policy) for r in records] == [
        ("o1", True, "compact after 0s"),
        ("o2", True, "compact after 0s"),
    ]
    report = store.verify("c")
    assert report.ok, report.problems
    assert any("compacted by retention" in note for note in report.conversations[0].notes)


def test_compaction_is_idempotent_and_a_dry_run_writes_nothing(store: EventStore) -> None:
    _history(store)
    untouched = dump(store.engine)
    dry = store.compact(older_than=NOW, dry_run=True)
    assert (dry.dry_run, dry.events) == (True, 2)
    assert dump(store.engine) == untouched
    done = store.compact(older_than=NOW)
    assert (done.events, done.bytes_freed) == (dry.events, dry.bytes_freed)
    again = store.compact(older_than=NOW)
    assert (again.events, again.bytes_freed) == (0, 0)
    assert len(store.redactions("c")) == 2


def test_the_policy_age_and_the_minimum_decide(store: EventStore) -> None:
    _history(store)
    assert store.compact(older_than=timedelta(days=1)).events == 0  # all appended just now
    assert store.compact(older_than=NOW, min_freed=10**6).events == 0
    everything = store.compact(older_than=NOW, min_freed=-(10**6))
    assert everything.events == 4  # the small actions too, when asked
    assert store.verify().ok
    # The live view, the condensation and the request were never candidates.
    assert sorted(r.event_id for r in store.redactions("c")) == ["a1", "a2", "o1", "o2"]


def test_only_the_named_conversation_is_compacted(store: EventStore) -> None:
    _history(store, "c")
    _history(store, "d")
    assert store.compact("d", older_than=NOW).events == 2
    assert store.redactions("c") == []
    assert "long tool output" in _payload(store, "c", "o1")


def test_a_fork_that_holds_an_event_keeps_its_content(store: EventStore) -> None:
    _history(store)
    store.fork("c", 5, "f")  # before the condensation: a1..o2 are in f's live view
    before = _states(store, "f")
    assert store.compact(older_than=NOW).events == 0
    assert "long tool output" in _payload(store, "c", "o1")
    assert _states(store, "f") == before
    store.erase("f", reason="done with it")
    assert store.compact(older_than=NOW).events == 2


def test_a_fork_into_compacted_history_is_refused(store: EventStore) -> None:
    _history(store)
    store.compact(older_than=NOW)
    with pytest.raises(CompactedHistoryError, match="'o1' \\(seq 3\\)") as refused:
        store.fork("c", 4, "f")
    assert isinstance(refused.value, InvalidArgumentError)
    assert (refused.value.event_id, refused.value.seq) == ("o1", 3)
    assert "f" not in store.conversation_ids()
    store.fork("c", 2, "early")  # before o1: its view holds a1 only, which was not compacted
    store.fork("c", 7, "late")  # after the condensation: nothing compacted in its view
    assert triple(store.view("late")) == triple(store.view("c", as_of=7))
    assert store.verify().ok


def test_forks_compact_their_own_log(store: EventStore) -> None:
    _history(store)
    store.fork("c", 7, "f")  # after the condensation: its view is m1, the summary, m2
    store.append("f", [action("fa", "ft", llm_response_id="fr"), _observation("fo", "ft", "fa")])
    store.append("f", [condensation("fk", ("fa", "fo", "m2"))])
    store.fork("f", 9, "g")  # holds fa and fo
    report = store.compact("f", older_than=NOW)
    assert report.events == 0  # f's own forgotten events are all held by g; c's are c's
    store.erase("g", reason="r")
    assert store.compact("f", older_than=NOW).events == 1  # fo (fa is small)
    assert [r.event_id for r in store.redactions("f") if r.conversation_id == "f"] == ["fo"]
    assert store.compact(older_than=NOW).events == 2  # c's o1 and o2: f holds neither
    for cid in ("c", "f"):
        assert store.verify(cid).ok, store.verify(cid).problems


def test_redaction_and_compaction_of_one_event(store: EventStore) -> None:
    _history(store)
    store.redact("c", "o1", reason="a secret", paths=["/observation/content"])
    store.compact(older_than=NOW, min_freed=-(10**6))
    assert store.verify().ok, store.verify().problems
    with pytest.raises(InvalidArgumentError, match="nothing left"):
        store.redact("c", "o2", reason="too late")
    payload = _payload(store, "c", "o1")
    assert MARK in payload and COMPACTED not in payload  # the one string was redacted first
    assert [(r.event_id, r.round, r.compacted) for r in store.redactions("c")][:2] == [
        ("a1", 1, True),
        ("o1", 1, False),
    ]


def test_tampering_with_a_compacted_event_is_found(store: EventStore) -> None:
    _history(store)
    store.compact(older_than=NOW)
    with store.engine.begin() as conn, guard_off(conn):
        conn.execute(
            text(
                "UPDATE events SET payload = replace(payload, :was, :now) "
                "WHERE conversation_id = 'c' AND seq = 3"
            ),
            {"was": '"exit_code":0', "now": '"exit_code":1'},
        )
    problems = store.verify("c").problems
    assert problems and "seq 3" in problems[0], problems


def test_an_event_whose_link_is_broken_is_left(store: EventStore) -> None:
    _history(store)
    with store.engine.begin() as conn, guard_off(conn):
        conn.execute(
            text(
                "UPDATE events SET payload = replace(payload, 'long tool', 'short tool') "
                "WHERE conversation_id = 'c' AND seq = 3"
            )
        )
    report = store.compact(older_than=NOW)
    assert (report.events, report.unverifiable) == (1, 1)
    assert "short tool" in _payload(store, "c", "o1")  # left as it is, for verify to name
    assert "seq 3" in store.verify("c").problems[0]


def test_bad_arguments_are_refused(store: EventStore) -> None:
    _history(store)
    for kwargs in (
        {"older_than": -timedelta(seconds=1)},
        {"older_than": 5},
        {"older_than": NOW, "batch": 0},
        {"older_than": NOW, "policy": ""},
    ):
        with pytest.raises(InvalidArgumentError):
            store.compact(**kwargs)
    assert store.redactions("c") == []


def test_batches_go_on_where_the_last_one_ended(store: EventStore) -> None:
    store.append("c", [message("m0")])
    for i in range(7):
        store.append(
            "c",
            [
                action(f"a{i}", f"t{i}", llm_response_id=f"r{i}"),
                _observation(f"o{i}", f"t{i}", f"a{i}"),
            ],
        )
    forgotten = [f"{kind}{i}" for i in range(7) for kind in ("a", "o")]
    store.append("c", [condensation("k", tuple(forgotten))])
    report = store.compact(older_than=NOW, batch=2)
    assert (report.events, report.small) == (7, 7)
    assert store.verify().ok


def test_a_batch_out_of_time_commits_what_it_did_and_the_next_goes_on(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no time to spend, each transaction takes one event: the same events end up
    compacted, each once."""
    from viewstore.store import retention_api  # noqa: PLC0415

    monkeypatch.setattr(retention_api, "BATCH_SECONDS", 0.0)
    _history(store, "c")
    _history(store, "d")
    report = store.compact(older_than=NOW)
    assert (report.events, report.small) == (4, 4)
    assert sorted(
        (r.conversation_id, r.event_id) for cid in "cd" for r in store.redactions(cid)
    ) == [
        ("c", "o1"),
        ("c", "o2"),
        ("d", "o1"),
        ("d", "o2"),
    ]
    assert store.verify().ok
