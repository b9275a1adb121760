"""What a store-backed agent server keeps of a conversation (migration 0027,
``viewstore.store.adapters.runners``): the runner lease, claimed, renewed by its holder, refused
to others while it lasts, taken over one generation later once it expired, released at once,
every write of a server fenced by its generation; the server's metadata and times, listed
keyset-paged in either order and direction and filtered by the base state's execution status;
erased with the conversation, forgotten without its events. And processes claiming one
conversation at once: exactly one wins."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.domain.errors import (
    ConversationErasedError,
    DamagedBaseStateError,
    InvalidArgumentError,
    RunnerHeldError,
    RunnerLostError,
)
from viewstore.store.adapters.runners import Order
from viewstore.store.records import RunnerClaim, ServerConversation

from ..ops._helpers import message

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
#: A lease no test outlives.
LONG = 600.0
#: A lease a test outlives by sleeping past it.
SHORT = 0.3


def _meta(title: str) -> str:
    return json.dumps({"title": title, "workspace": {"kind": "LocalWorkspace"}})


def _described(
    store: EventStore,
    key: str,
    *,
    runner: str = "server-a",
    generation: int = 1,
    created: datetime = T0,
    updated: datetime = T0,
) -> None:
    store.save_server_meta(
        key,
        _meta(key),
        runner=runner,
        generation=generation,
        created_at=created,
        updated_at=updated,
    )


def _row(store: EventStore, key: str) -> ServerConversation:
    found = store.server_conversation(key)
    assert found is not None, key
    return found


def test_a_free_lease_is_claimed_renewed_by_its_holder_and_refused_to_others(
    store: EventStore,
) -> None:
    assert store.server_conversation("c1") is None
    assert store.claim_runner("c1", "server-a", ttl=LONG) == RunnerClaim(1, None)
    first = _row(store, "c1")
    assert (first.runner, first.generation, first.meta) == ("server-a", 1, None)
    assert first.lease_expires_at is not None and first.lease_expires_at.tzinfo is not None
    assert first.lease_expires_at > datetime.now(UTC) + timedelta(seconds=LONG - 60)
    # Claiming again is how a holder renews: same generation, no one taken from.
    assert store.claim_runner("c1", "server-a", ttl=LONG) == RunnerClaim(1, None)
    again = _row(store, "c1")
    assert again.lease_expires_at is not None and again.lease_expires_at >= first.lease_expires_at
    with pytest.raises(RunnerHeldError, match="'server-a'") as refused:
        store.claim_runner("c1", "server-b", ttl=LONG)
    assert (refused.value.conversation_id, refused.value.runner) == ("c1", "server-a")
    assert _row(store, "c1") == again
    store.check_runner("c1", "server-a", 1)
    for runner, generation in (("server-b", 1), ("server-a", 2), ("server-a", 0)):
        with pytest.raises(RunnerLostError):
            store.check_runner("c1", runner, generation)
    store.renew_runner("c1", "server-a", 1, ttl=LONG)
    renewed = _row(store, "c1")
    assert renewed.lease_expires_at is not None
    assert renewed.lease_expires_at >= again.lease_expires_at
    with pytest.raises(RunnerLostError):
        store.renew_runner("c1", "server-b", 1, ttl=LONG)
    with pytest.raises(RunnerLostError):
        store.check_runner("nobody", "server-a", 1)
    assert _row(store, "c1") == renewed


def test_an_expired_lease_is_taken_over_and_its_old_holder_fenced_off(store: EventStore) -> None:
    store.claim_runner("c1", "server-a", ttl=SHORT)
    _described(store, "c1")
    time.sleep(SHORT + 0.1)
    assert store.claim_runner("c1", "server-b", ttl=LONG) == RunnerClaim(2, "server-a")
    taken = _row(store, "c1")
    assert (taken.runner, taken.generation, taken.meta) == ("server-b", 2, _meta("c1"))
    # The stalled holder wakes up: each of its writes is refused and changes nothing.
    with pytest.raises(RunnerLostError) as lost:
        store.renew_runner("c1", "server-a", 1, ttl=LONG)
    assert (lost.value.runner, lost.value.generation) == ("server-a", 1)
    with pytest.raises(RunnerLostError):
        store.save_server_meta(
            "c1", "{}", runner="server-a", generation=1, created_at=T0, updated_at=T0
        )
    assert store.release_runner("c1", "server-a", 1) is False
    with pytest.raises(RunnerLostError):
        store.check_runner("c1", "server-a", 1)
    with pytest.raises(RunnerHeldError, match="'server-b'"):
        store.claim_runner("c1", "server-a", ttl=LONG)
    assert _row(store, "c1") == taken
    # The successor's writes go through.
    store.check_runner("c1", "server-b", 2)
    later = T0 + timedelta(minutes=5)
    _described(store, "c1", runner="server-b", generation=2, updated=later)
    assert _row(store, "c1").updated_at == later


def test_a_release_frees_the_lease_at_once(store: EventStore) -> None:
    store.claim_runner("c1", "server-a", ttl=LONG)
    assert store.release_runner("c1", "server-a", 1) is True
    released = _row(store, "c1")
    assert (released.runner, released.generation, released.lease_expires_at) == (None, 1, None)
    assert store.release_runner("c1", "server-a", 1) is False
    with pytest.raises(RunnerLostError):
        store.check_runner("c1", "server-a", 1)
    # Nobody is taken from: the lease was free.
    assert store.claim_runner("c1", "server-b", ttl=LONG) == RunnerClaim(2, None)
    assert store.release_runner("c1", "server-b", 2) is True
    assert store.claim_runner("c1", "server-a", ttl=LONG) == RunnerClaim(3, None)
    assert store.release_runner("nobody", "server-a", 1) is False


def test_meta_and_times_are_kept_with_the_status_of_the_base_state(store: EventStore) -> None:
    store.claim_runner("c1", "server-a", ttl=LONG)
    created = datetime(2026, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))  # T0 elsewhere
    updated = T0 + timedelta(minutes=5, microseconds=123_456)
    meta = json.dumps({"title": "Fix the build ✓", "tags": {"team": "infra"}})
    store.save_server_meta(
        "c1", meta, runner="server-a", generation=1, created_at=created, updated_at=updated
    )
    got = _row(store, "c1")
    assert (got.conversation_id, got.meta, got.created_at, got.updated_at) == (
        "c1",
        meta,
        T0,
        updated,
    )
    assert got.created_at.tzinfo is not None and got.updated_at.tzinfo is not None
    assert got.created_at.utcoffset() == got.updated_at.utcoffset() == timedelta(0)
    assert got.execution_status is None  # no base state
    assert store.server_conversations()[0].execution_status is None
    store.append("c1", [message("m1")])
    finished = json.dumps({"id": "c1", "execution_status": "finished"})
    store.save_base_state("c1", finished, at_version=1)
    assert _row(store, "c1").execution_status == "finished"
    # A base state that names no status is the SDK's default.
    store.save_base_state("c1", json.dumps({"id": "c1"}), at_version=1)
    assert _row(store, "c1").execution_status == "idle"
    # An escaped NUL is valid JSON the SDK may write (a tool's output in the agent's state).
    nul = json.dumps({"execution_status": "running", "out": "a\x00b", "path": "C:\\u0000"})
    store.save_base_state("c1", nul, at_version=1)
    assert _row(store, "c1").execution_status == "running"
    assert [r.execution_status for r in store.server_conversations(status="running")] == ["running"]
    assert store.count_server_conversations(status="running") == 1


#: How many conversations the listing pages over, and its page.
LISTED = 25
PAGE = 10
#: The base state each listed conversation gets, by ``i % 3``: none reads as the SDK's "idle".
STATUSES = ("finished", "running", None)


def _listed(store: EventStore) -> dict[str, tuple[datetime, datetime, str]]:
    """Conversations with meta whose times tie in groups, in other groups in each order; and
    one with a lease but no meta (a server that claimed, then died before describing it)."""
    expected: dict[str, tuple[datetime, datetime, str]] = {}
    for i in range(LISTED):
        key = f"s{(i * 7) % LISTED:02d}"  # ids in another order than the times
        created = T0 + timedelta(minutes=i // 3)
        updated = T0 + timedelta(seconds=((i * 11) % LISTED) // 2)
        store.claim_runner(key, "server-a", ttl=LONG)
        _described(store, key, created=created, updated=updated)
        status = STATUSES[i % 3]
        if status is not None:
            store.append(key, [message(f"{key}-m1")])
            store.save_base_state(key, json.dumps({"execution_status": status}), at_version=1)
        expected[key] = (created, updated, status or "idle")
    store.claim_runner("bare", "server-a", ttl=LONG)
    return expected


def _walk(store: EventStore, **options: Any) -> list[str]:
    """Every page, as an agent server pages: one row more than the page, whose id starts the
    next page (``start`` is inclusive)."""
    walked: list[str] = []
    start: str | None = None
    while True:
        rows = store.server_conversations(start=start, limit=PAGE + 1, **options)
        if start is not None:
            assert rows[0].conversation_id == start
        walked.extend(r.conversation_id for r in rows[:PAGE])
        if len(rows) <= PAGE:
            return walked
        start = rows[PAGE].conversation_id


def test_the_listing_pages_through_each_order_without_gaps_or_repeats(store: EventStore) -> None:
    expected = _listed(store)
    orders: list[tuple[Order, int]] = [("created_at", 0), ("updated_at", 1)]
    for (order, at), descending in itertools.product(orders, (False, True)):
        ascending = sorted(expected, key=lambda key: (expected[key][at], key))
        assert len({expected[key][at] for key in expected}) < LISTED  # there are ties to break
        want = ascending[::-1] if descending else ascending
        assert _walk(store, order=order, descending=descending) == want, (order, descending)
        rows = store.server_conversations(order=order, descending=descending, limit=LISTED + 5)
        assert [r.conversation_id for r in rows] == want
        assert [(r.created_at, r.updated_at) for r in rows] == [expected[k][:2] for k in want]
        for status in ("finished", "running", "idle", "error"):
            naive = [key for key in want if expected[key][2] == status]
            assert _walk(store, order=order, descending=descending, status=status) == naive
            assert store.count_server_conversations(status=status) == len(naive)
    assert store.count_server_conversations() == LISTED
    assert store.server_conversation("bare") is not None  # kept, but not listed


def test_bad_arguments_are_refused_and_write_nothing(store: EventStore) -> None:
    for ttl in (0, -1, 0.0, True, "5", None, 86_401):
        with pytest.raises(InvalidArgumentError):
            store.claim_runner("c1", "server-a", ttl=ttl)  # type: ignore[arg-type]
    for runner in ("", "a\x00b", "a\nb", "\x1f", "x" * 256, 7, None):
        with pytest.raises(InvalidArgumentError):
            store.claim_runner("c1", runner, ttl=LONG)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        store.claim_runner("..", "server-a", ttl=LONG)
    assert store.server_conversation("c1") is None
    store.claim_runner("c1", "server-a", ttl=LONG)
    held = _row(store, "c1")
    with pytest.raises(InvalidArgumentError):
        store.renew_runner("c1", "server-a", 1, ttl=0)
    with pytest.raises(InvalidArgumentError):
        store.renew_runner("c1", "", 1, ttl=LONG)
    with pytest.raises(InvalidArgumentError):
        store.release_runner("c1", "a\tb", 1)
    naive = datetime(2026, 5, 1, 12, 0)
    for created, updated in ((naive, T0), (T0, naive), ("2026-05-01", T0)):
        with pytest.raises(InvalidArgumentError):
            store.save_server_meta(
                "c1",
                "{}",
                runner="server-a",
                generation=1,
                created_at=created,  # type: ignore[arg-type]
                updated_at=updated,
            )
    with pytest.raises(InvalidArgumentError):
        store.save_server_meta(
            "c1",
            b"{}",  # type: ignore[arg-type]
            runner="server-a",
            generation=1,
            created_at=T0,
            updated_at=T0,
        )
    with pytest.raises(InvalidArgumentError):
        store.server_conversations(order="bogus")  # type: ignore[arg-type]
    for limit in (0, -1, True):
        with pytest.raises(InvalidArgumentError):
            store.server_conversations(limit=limit)
    assert _row(store, "c1") == held


def test_erasure_takes_the_server_row_with_the_conversation(store: EventStore) -> None:
    for key in ("c1", "c2"):
        store.append(key, [message(f"{key}-m1")])
        store.claim_runner(key, "server-a", ttl=LONG)
        _described(store, key)
    store.save_base_state("c1", json.dumps({"execution_status": "finished"}), at_version=1)
    store.erase("c1", reason="retention")
    assert store.server_conversation("c1") is None
    assert [r.conversation_id for r in store.server_conversations()] == ["c2"]
    assert store.count_server_conversations() == 1
    with pytest.raises(ConversationErasedError):
        store.claim_runner("c1", "server-b", ttl=LONG)
    with pytest.raises(RunnerLostError):
        _described(store, "c1")
    assert store.server_conversation("c1") is None
    assert _row(store, "c2").runner == "server-a"


def test_forgetting_drops_the_row_and_keeps_the_events(store: EventStore) -> None:
    store.append("c1", [message("m1"), message("m2")])
    store.claim_runner("c1", "server-a", ttl=LONG)
    _described(store, "c1")
    store.save_base_state("c1", json.dumps({"execution_status": "idle"}), at_version=2)
    assert store.forget_server_conversation("c1") is True
    assert store.server_conversation("c1") is None
    assert store.forget_server_conversation("c1") is False
    assert store.server_conversations() == [] and store.count_server_conversations() == 0
    assert [e.event_id for e in store.events("c1")] == ["m1", "m2"]
    assert store.base_state("c1") is not None
    assert store.verify("c1").ok
    with pytest.raises(RunnerLostError):
        store.check_runner("c1", "server-a", 1)


def test_the_base_state_signature_moves_with_each_save_and_append(store: EventStore) -> None:
    assert store.base_state_signature("c1") is None
    store.append("c1", [message("m1")])
    assert store.base_state_signature("c1") is None  # events, but no base state
    store.save_base_state("c1", json.dumps({"execution_status": "running"}), at_version=1)
    first = store.base_state_signature("c1")
    assert first is not None and store.base_state_signature("c1") == first
    store.save_base_state("c1", json.dumps({"execution_status": "running"}), at_version=1)
    saved = store.base_state_signature("c1")
    assert saved is not None and saved != first
    store.append("c1", [message("m2")])
    appended = store.base_state_signature("c1")
    assert appended is not None and appended not in (first, saved)
    assert store.base_state_signature("c1") == appended


# --------------------------------------------------------------------------- from processes

#: One agent server: connected, it says so and waits for the go, then claims each conversation.
#: A script of its own, so a process imports viewstore only (a spawned worker would import the
#: test module, pytest with it, and cost seconds more per process).
_SERVER = """
import json, sys
from viewstore import EventStore, RunnerHeldError
url, runner, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
with EventStore(url) as store:
    store.server_conversation(keys[0])
    print("ready", flush=True)
    sys.stdin.readline()
    for key in keys:
        try:
            claim = store.claim_runner(key, runner, ttl=600)
        except RunnerHeldError as held:
            print(json.dumps([key, "held", held.runner]), flush=True)
        else:
            print(json.dumps([key, "won", claim.generation, claim.taken_from]), flush=True)
"""
#: Servers claiming at once.
SERVERS = 6


@pytest.mark.parametrize(
    "db_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_servers_claiming_one_conversation_at_once_leave_one_runner(
    store: EventStore, db_url: str
) -> None:
    """A free lease and an expired one, each claimed by every server at the same moment: one
    wins, the others are refused and name it. (Not on the partitioned layout too: the same
    statements on the same row locks, and six processes per layout are most of this module's
    time.)"""
    store.claim_runner("expired", "server-old", ttl=0.05)  # long gone once the servers start
    keys = ["fresh", "expired"]
    servers = {
        f"server-{i}": subprocess.Popen(
            [sys.executable, "-c", _SERVER, db_url, f"server-{i}", *keys],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(SERVERS)
    }
    try:
        for process in servers.values():
            assert process.stdout is not None
            ready = process.stdout.readline()
            assert ready == "ready\n", (ready, process.communicate(timeout=60))
        for process in servers.values():  # the go, to all of them at once
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        said = {runner: process.communicate(timeout=120) for runner, process in servers.items()}
    finally:
        for process in servers.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    assert all(process.returncode == 0 for process in servers.values()), said
    claims = {
        runner: {line[0]: tuple(line[1:]) for line in map(json.loads, out.splitlines())}
        for runner, (out, _) in said.items()
    }
    for key, generation, taken_from in (("fresh", 1, None), ("expired", 2, "server-old")):
        outcomes = {runner: found[key] for runner, found in claims.items()}
        winners = [runner for runner, outcome in outcomes.items() if outcome[0] == "won"]
        assert len(winners) == 1, (key, outcomes)
        (winner,) = winners
        assert outcomes[winner] == ("won", generation, taken_from)
        others = {runner: outcome for runner, outcome in outcomes.items() if runner != winner}
        assert set(others.values()) == {("held", winner)}, (key, outcomes)
        row = _row(store, key)
        assert (row.runner, row.generation) == (winner, generation)


def test_a_listing_page_reads_its_base_states_in_one_call(store: EventStore) -> None:
    """``base_states``: what ``base_state`` gives for each id, at once; ids without a base
    state are missing, and each state says how far behind its log it is."""
    for key in ("c1", "c2", "c3"):
        store.append(key, [message(f"{key}-m1")])
    store.save_base_state("c1", json.dumps({"id": "c1", "execution_status": "idle"}), at_version=1)
    store.save_base_state("c2", json.dumps({"id": "c2"}), at_version=1)
    store.save_base_state("c2", json.dumps({"id": "c2", "n": 2}), at_version=1)
    store.append("c2", [message("c2-m2")])  # after the snapshot: one event behind
    found = store.base_states(["c1", "c2", "c3", "never", "c1"])
    assert set(found) == {"c1", "c2"}
    for key in ("c1", "c2"):
        assert found[key] == store.base_state(key)
    assert (found["c2"].revision, found["c2"].version, found["c2"].behind) == (2, 2, 1)
    assert found["c1"].behind == 0
    # the signature a server lists by, from the same read
    assert (found["c2"].revision, found["c2"].version) == store.base_state_signature("c2")
    assert store.base_states([]) == {}
    with pytest.raises(InvalidArgumentError):
        store.base_states([f"k{i}" for i in range(1001)])
    with pytest.raises(InvalidArgumentError):
        store.base_states(["bad id with spaces\n"])


@pytest.mark.sync_only
def test_a_damaged_base_state_is_left_out_of_a_page(store: EventStore) -> None:
    """A base state changed behind the store's back is missing from ``base_states`` (so a
    listing reads it alone, and ``base_state`` names the damage), the others are there."""
    for key in ("c1", "c2"):
        store.append(key, [message(f"{key}-m1")])
        store.save_base_state(key, json.dumps({"id": key}), at_version=1)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE base_states SET payload = '[1' WHERE conversation_id = 'c2'"))
    assert set(store.base_states(["c1", "c2"])) == {"c1"}
    with pytest.raises(DamagedBaseStateError):
        store.base_state("c2")


def _update(eid: str, key: str, value: Any) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "environment",
        "key": key,
        "value": value,
        "kind": "ConversationStateUpdateEvent",
    }


def test_the_last_state_update_of_a_key_is_found_in_sql(store: EventStore) -> None:
    """``last_state_update``: the newest state update of a field, whatever came after it, a
    fork's inherited prefix included; None for a log without one and an unknown conversation.
    A payload holding an escaped NUL (which PostgreSQL's JSON refuses raw) is found too."""
    goal = {"active": True, "objective": "ship it", "status": "running"}
    store.append(
        "c1",
        [
            message("m1"),
            _update("u1", "goal", {"active": False, "note": "old"}),
            _update("u2", "goal", {**goal, "out": "a\x00b"}),
            _update("u3", "stats", {"goal": "not this one"}),
            message("m2", "goal"),
        ],
    )
    assert store.last_state_update("c1", "goal") == _update("u2", "goal", {**goal, "out": "a\x00b"})
    assert store.last_state_update("c1", "stats") == _update(
        "u3", "stats", {"goal": "not this one"}
    )
    assert store.last_state_update("c1", "execution_status") is None
    assert store.last_state_update("never", "goal") is None
    # a fork sees its source's prefix, then its own events over it
    store.fork("c1", 3, "f1")
    assert store.last_state_update("f1", "goal") == _update("u2", "goal", {**goal, "out": "a\x00b"})
    assert store.last_state_update("f1", "stats") is None  # u3 is past the fork point
    store.append("f1", [_update("u4", "goal", {"active": False})])
    assert store.last_state_update("f1", "goal") == _update("u4", "goal", {"active": False})
    assert store.last_state_update("c1", "goal")["id"] == "u2"  # the source is untouched
    with pytest.raises(InvalidArgumentError):
        store.last_state_update("c1", "")
