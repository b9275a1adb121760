"""Retention by policy (``store.apply_retention``, docs/retention.md): the default and each
conversation's own rules decide what is erased for being idle and what is compacted, and each
source keeps its last conversations; ``never`` keeps; a dry run writes nothing. On every
layout, through both API flavours."""

from __future__ import annotations

import pytest

from viewstore import EventStore, InvalidArgumentError, RetentionPolicy, RetentionReport
from viewstore.store import SourceInfo

from ..ops._helpers import action, age, condensation, dump, message

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
