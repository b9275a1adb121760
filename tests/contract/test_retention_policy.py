"""Retention by policy (``store.apply_retention``, docs/retention.md): the default and each
conversation's own rules decide what is erased for being idle, what is compacted and what is
redacted for its age (live events too), and each source keeps its last conversations;
``never`` keeps; a dry run writes nothing. On every layout, through both API flavours."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from viewstore import (
    CompactedHistoryError,
    EventStore,
    InvalidArgumentError,
    RetentionPolicy,
    RetentionReport,
)
from viewstore.domain.scrub import COMPACTED, MARK
from viewstore.store import SourceInfo
from viewstore.store.database.schema import conversations, events

from ..ops._helpers import action, age, condensation, dump, guard_off, message

BIG = "a line of a long tool output\n" * 200


def _condensed(store: EventStore, cid: str) -> None:
    store.append(
        cid,
        [
            message(f"{cid}-m"),
            action(f"{cid}-a", "t1"),
            {
                "id": f"{cid}-o",
                "source": "environment",
                "tool_name": "terminal",
                "tool_call_id": "t1",
                "action_id": f"{cid}-a",
                "observation": {"content": [{"type": "text", "text": BIG}], "kind": "X"},
                "kind": "ObservationEvent",
            },
            condensation(f"{cid}-k", (f"{cid}-a", f"{cid}-o")),
        ],
    )


POLICY = """
[default]
compact_after = "0d"
delete_idle_after = "90d"

[conversations."hold"]
compact_after = "never"
delete_idle_after = "never"

[conversations."short"]
delete_idle_after = "10d"
"""


def test_a_policy_erases_the_idle_and_compacts_the_rest(store: EventStore) -> None:
    for cid in ("old", "hold", "short", "fresh"):
        _condensed(store, cid)
    age(store, ["old", "hold"], days=100)
    age(store, ["short"], days=20)
    report = store.apply_retention(RetentionPolicy.from_toml(POLICY))
    assert isinstance(report, RetentionReport)
    assert sorted(report.erased) == ["old", "short"]
    assert sorted(store.conversation_ids()) == ["fresh", "hold"]
    assert store.tombstone("old").reason == "retention: idle for 90d"  # type: ignore[union-attr]
    assert store.tombstone("short").reason == "retention: idle for 10d"  # type: ignore[union-attr]
    assert (report.events, report.compacted_conversations) == (1, 1)  # fresh's output; hold never
    assert [r.policy for r in store.redactions("fresh")] == ["compact after 0s"]
    assert store.redactions("hold") == []
    assert store.verify("fresh").ok  # (hold's aged row is what verify would name)


def test_a_dry_run_writes_nothing(store: EventStore) -> None:
    for cid in ("old", "fresh"):
        _condensed(store, cid)
    age(store, ["old"], days=100)
    before = dump(store.engine)
    report = store.apply_retention(RetentionPolicy.from_toml(POLICY), dry_run=True)
    assert (report.dry_run, list(report.erased), report.events) == (True, ["old"], 2)
    assert dump(store.engine) == before


def test_forks_go_before_their_sources(store: EventStore) -> None:
    _condensed(store, "src")
    store.fork("src", 4, "fork")
    age(store, ["src", "fork"], days=100)
    report = store.apply_retention(
        RetentionPolicy.from_toml('[default]\ndelete_idle_after = "90d"')
    )
    assert list(report.erased) == ["fork", "src"]
    assert store.conversation_ids() == []


def test_an_empty_policy_keeps_everything(store: EventStore) -> None:
    _condensed(store, "c")
    age(store, ["c"], days=1000)
    report = store.apply_retention(RetentionPolicy.from_toml(""))
    assert (report.erased, report.events, report.compacted_conversations) == ((), 0, 0)
    assert store.conversation_ids() == ["c"]


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[default]\ncompact_after = "30y"', "default.compact_after"),
        ('[default]\ncompact_afer = "30d"', "compact_afer"),
        ('[defaults]\ncompact_after = "30d"', "defaults"),
        ("[conversations.c]\ndelete_idle_after = 30", "conversations.c.delete_idle_after"),
        ('[default]\nredact_after = "90"', "default.redact_after"),
        ("[conversations.c]\nredact_after = 90", "conversations.c.redact_after"),
        ('[default]\nredact_afterwards = "90d"', "redact_afterwards"),
        ("[default", "TOML"),
    ],
)
def test_a_bad_policy_is_refused_with_where(toml: str, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named.replace(".", r"\.")):
        RetentionPolicy.from_toml(toml)


def test_the_policy_is_not_anything_else(store: EventStore) -> None:
    with pytest.raises(InvalidArgumentError, match="RetentionPolicy"):
        store.apply_retention({"default": {}})  # type: ignore[arg-type]


KEEP_LAST = """
[default]
keep_last_per_source = 2

[sources."big"]
keep_last = 3

[sources."unlimited"]
keep_last = "never"

[conversations."held"]
delete_idle_after = "never"
"""


def _from(store: EventStore, source: str, cids: list[str]) -> None:
    """Conversations of ``source``, the first appended to longest ago."""
    for days, cid in zip(range(len(cids), 0, -1), cids, strict=True):
        store.save_conversation_info(SourceInfo(cid, source))  # claimed before it has events
        store.append(cid, [message(f"{cid}-m")])
        age(store, [cid], days)


def test_only_the_last_conversations_of_each_source_are_kept(store: EventStore) -> None:
    _from(store, "small", ["s1", "s2", "s3", "s4"])
    _from(store, "big", ["b1", "b2", "b3", "b4"])
    _from(store, "unlimited", ["u1", "u2", "u3"])
    _from(store, "held-source", ["held", "h2", "h3"])
    store.append("no-source", [message("n")])
    dry = store.apply_retention(RetentionPolicy.from_toml(KEEP_LAST), dry_run=True)
    assert sorted(dry.erased) == ["b1", "s1", "s2"]
    report = store.apply_retention(RetentionPolicy.from_toml(KEEP_LAST))
    # held is the oldest of its source, beyond the two kept, but on hold: it stays.
    assert sorted(report.erased) == ["b1", "s1", "s2"]
    assert sorted(store.conversation_ids()) == sorted(
        ["s3", "s4", "b2", "b3", "b4", "u1", "u2", "u3", "held", "h2", "h3", "no-source"]
    )
    reason = store.tombstone("s1").reason  # type: ignore[union-attr]
    assert reason == "retention: beyond the last 2 conversations of small"
    again = store.apply_retention(RetentionPolicy.from_toml(KEEP_LAST))
    assert again.erased == ()


def test_a_source_conversation_goes_once_its_forks_have(store: EventStore) -> None:
    _from(store, "src", ["old", "new"])
    store.fork("old", 1, "lone-fork")  # no source of its own: never erased by the rule
    policy = RetentionPolicy.from_toml("[default]\nkeep_last_per_source = 1")
    assert store.apply_retention(policy).erased == ()  # old has a fork the rule cannot reach
    store.erase("lone-fork", reason="by hand")
    store.save_conversation_info(SourceInfo("old-fork", "src"))
    store.fork("old", 1, "old-fork")
    age(store, ["old-fork"], 10)
    report = store.apply_retention(policy)
    assert list(report.erased) == ["old-fork", "old"]  # the fork first, its source next round
    assert store.conversation_ids() == ["new"]


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[default]\nkeep_last_per_source = 0", "default.keep_last_per_source"),
        ('[default]\nkeep_last_per_source = "5"', "default.keep_last_per_source"),
        ("[sources.a]\nkeep_last = -1", "sources.a.keep_last"),
        ('[sources.a]\nkeep_last = 2\ncompact_after = "1d"', "sources.a"),
    ],
)
def test_a_bad_keep_last_is_refused_with_where(toml: str, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named.replace(".", r"\.")):
        RetentionPolicy.from_toml(toml)


# -- redact_after: old content goes, live events too; metadata stays -------------------------

SECRET = "my card is 4111 1111 1111 1111"


def _live(store: EventStore, cid: str) -> None:
    """seq 1 m1 (a secret), 2 a1, 3 o1 (a long output), 4 m2: all in the live view."""
    store.append(
        cid,
        [
            message(f"{cid}-m1", SECRET),
            action(f"{cid}-a1", "t1"),
            {
                "id": f"{cid}-o1",
                "source": "environment",
                "tool_name": "terminal",
                "tool_call_id": "t1",
                "action_id": f"{cid}-a1",
                "observation": {"content": [{"type": "text", "text": BIG}], "kind": "X"},
                "kind": "ObservationEvent",
            },
            message(f"{cid}-m2", "said just now"),
        ],
    )


def _backdate(store: EventStore, cid: str, days: int, upto: int) -> None:
    """Make ``cid``'s events up to seq ``upto`` look appended ``days`` earlier, as the database
    owner could: the conversation's creation moves with them and its last append stays its
    last event's, so the times still rise along seq and ``verify`` has nothing to say (``age``
    moves the conversation row's last append only; ``redact_after`` reads the log's)."""
    shift = timedelta(days=days)
    with store.engine.begin() as conn, guard_off(conn):
        for seq, at in conn.execute(
            select(events.c.seq, events.c.recorded_at).where(
                events.c.conversation_id == cid, events.c.seq <= upto
            )
        ).all():
            conn.execute(
                update(events)
                .where(events.c.conversation_id == cid, events.c.seq == seq)
                .values(recorded_at=at - shift)
            )
        (created,) = conn.execute(
            select(conversations.c.created_at).where(conversations.c.id == cid)
        ).one()
        last = select(func.max(events.c.recorded_at)).where(events.c.conversation_id == cid)
        conn.execute(
            update(conversations)
            .where(conversations.c.id == cid)
            .values(created_at=created - shift, updated_at=last.scalar_subquery())
        )


def _payloads(store: EventStore, cid: str) -> dict[str, str]:
    return {e.event_id: e.payload_json for e in store.events(cid)}


REDACT = '[default]\nredact_after = "90d"'


def test_redact_after_is_read_like_the_other_rules() -> None:
    policy = RetentionPolicy.from_toml(
        '[default]\nredact_after = "90d"\n[conversations.c]\ncompact_after = "1d"\n'
        '[conversations.hold]\nredact_after = "never"'
    )
    assert policy.default.redact_after == timedelta(days=90)
    assert policy.for_conversation("c").redact_after == timedelta(days=90)  # kept
    assert policy.for_conversation("hold").redact_after is None
    assert RetentionPolicy.from_toml("").default.redact_after is None  # never, by default
    assert policy.to_dict()["default"]["redact_after"] == "90d"
    assert policy.to_dict()["conversations"]["hold"]["redact_after"] == "never"


def test_old_events_are_redacted_live_ones_too(store: EventStore) -> None:
    _live(store, "c")
    _backdate(store, "c", days=100, upto=3)
    view = store.view("c")
    older = RetentionPolicy.from_toml('[default]\nredact_after = "200d"')
    assert store.apply_retention(older).redacted == 0  # not before its age
    assert store.redactions("c") == []
    report = store.apply_retention(RetentionPolicy.from_toml(REDACT))
    assert (report.redacted, report.redacted_conversations, report.events) == (3, 1, 0)
    assert report.redacted_bytes > len(BIG) // 2  # less the three records
    payloads = _payloads(store, "c")
    for eid in ("c-m1", "c-a1", "c-o1"):
        assert MARK in payloads[eid] and COMPACTED not in payloads[eid], eid
    assert SECRET not in payloads["c-m1"] and "long tool output" not in payloads["c-o1"]
    assert "said just now" in payloads["c-m2"]  # younger than the rule
    # Its metadata stays: the view, its indices and the request flag are what they were.
    after = store.view("c")
    assert (after.event_ids, after.manipulation_indices) == (
        view.event_ids,
        view.manipulation_indices,
    )
    # Unlike compaction, it reaches what the LLM is sent on resume.
    assert MARK in store.resume_view("c").events[0].payload_json
    records = store.redactions("c")
    assert [(r.event_id, r.paths, r.compacted, r.policy, r.reason) for r in records] == [
        (f"c-{eid}", None, False, "redact after 90d", "retention") for eid in ("m1", "a1", "o1")
    ]
    verified = store.verify("c")
    assert verified.ok, verified.problems
    notes = verified.conversations[0].notes
    assert any("redacted by retention (redact after 90d)" in note for note in notes), notes


def test_redact_after_twice_and_dry_run(store: EventStore) -> None:
    _live(store, "c")
    _backdate(store, "c", days=100, upto=3)
    policy = RetentionPolicy.from_toml(REDACT)
    untouched = dump(store.engine)
    dry = store.apply_retention(policy, dry_run=True)
    assert (dry.dry_run, dry.redacted, dry.redacted_conversations) == (True, 3, 1)
    assert dump(store.engine) == untouched
    done = store.apply_retention(policy)
    assert (done.redacted, done.redacted_bytes) == (dry.redacted, dry.redacted_bytes)
    redacted = dump(store.engine)
    again = store.apply_retention(policy)
    assert (again.redacted, again.redacted_bytes, again.redacted_conversations) == (0, 0, 1)
    assert dump(store.engine) == redacted
    assert store.verify().ok


def test_a_fork_over_a_redacted_event_is_taken(store: EventStore) -> None:
    _live(store, "c")
    store.fork("c", 3, "before")  # shares m1..o1: the log rows it reads are c's
    _backdate(store, "c", days=100, upto=3)
    store.apply_retention(RetentionPolicy.from_toml(REDACT))
    assert MARK in store.view("before").events[0].payload_json  # as after store.redact
    store.fork("c", 3, "after")  # not a CompactedHistoryError: redacted, not compacted
    assert [e.id for e in store.view("after").events] == ["c-m1", "c-a1", "c-o1"]
    assert SECRET not in store.view("after").events[0].payload_json
    assert store.verify().ok, store.verify().problems


def test_compacted_and_redacted_are_told_apart(store: EventStore) -> None:
    """seq 1 m, 2 a, 3 o (big), 4 k (forgets a, o): o is compacted first, a (too small to
    compact) and m (live) are then redacted; the condensation is kept."""
    _condensed(store, "c")
    store.append("c", [message("c-new", "said just now")])
    _backdate(store, "c", days=100, upto=4)
    both = '[default]\ncompact_after = "0d"\nredact_after = "90d"'
    report = store.apply_retention(RetentionPolicy.from_toml(both))
    assert (report.events, report.small, report.redacted) == (1, 1, 2)
    records = {r.event_id: r for r in store.redactions("c")}
    assert sorted(records) == ["c-a", "c-m", "c-o"]
    assert [records[eid].compacted for eid in ("c-a", "c-m", "c-o")] == [False, False, True]
    payloads = _payloads(store, "c")
    assert COMPACTED in payloads["c-o"] and MARK in payloads["c-m"] and MARK in payloads["c-a"]
    assert store.verify("c").ok, store.verify("c").problems
    with pytest.raises(CompactedHistoryError, match="c-o"):  # a compaction still refuses
        store.fork("c", 3, "f")
    store.fork("c", 1, "g")  # over the redacted message only
    with pytest.raises(InvalidArgumentError, match="redact after"):
        store.compact(older_than=timedelta(0), policy="redact after 1d")


def test_a_conversation_can_keep_its_content(store: EventStore) -> None:
    for cid in ("c", "hold"):
        _live(store, cid)
        _backdate(store, cid, days=100, upto=4)
    policy = f'{REDACT}\n[conversations."hold"]\nredact_after = "never"'
    report = store.apply_retention(RetentionPolicy.from_toml(policy))
    assert (report.redacted, report.redacted_conversations) == (4, 1)
    assert store.redactions("hold") == []
    assert SECRET in _payloads(store, "hold")["hold-m1"]
    assert all(MARK in payload for payload in _payloads(store, "c").values())
    assert store.verify().ok, store.verify().problems
