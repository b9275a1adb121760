"""The follower's timing and cursor (``viewstore.store.feed.follow_state``), without a database: the
waits after a notification, the polling backoff, the retry backoff, and the cursor kept."""

from __future__ import annotations

import pytest

from viewstore import FeedEntry, InvalidArgumentError
from viewstore.store.feed.follow_state import (
    POLL_START,
    RECHECK,
    RECHECKS,
    RETRY_MAX,
    RETRY_START,
    FollowState,
)


def _entry(txid: int, position: int) -> FeedEntry:
    return FeedEntry(f"{txid}.{position}", "c", position, f"e{position}", "MessageEvent")


def test_a_listener_waits_for_the_poll_until_notified() -> None:
    state = FollowState(None, 1.0, 10, listening=True)
    assert state.read([]) is False
    assert [state.wait() for _ in range(3)] == [1.0, 1.0, 1.0]


def test_a_notified_transaction_is_rechecked_until_the_feed_shows_it() -> None:
    state = FollowState(None, 1.0, 10, listening=True)
    state.read([_entry(100, 1)])
    state.notified("105")
    state.read([])  # hidden behind an older open transaction
    assert [state.wait() for _ in range(5)] == [RECHECK] * 5
    state.read([_entry(103, 2)])  # an older one came first: 105 is still awaited
    assert state.wait() == RECHECK
    state.read([_entry(105, 3)])
    assert state.cursor == "105.3"
    assert state.wait() == 1.0  # shown: back to the safety net


def test_rechecks_back_off_when_the_horizon_is_held_for_long() -> None:
    state = FollowState("1.1", 1.0, 10, listening=True)
    state.notified("9")
    waits = [state.wait() for _ in range(RECHECKS + 8)]
    assert waits[:RECHECKS] == [RECHECK] * RECHECKS
    backoff = waits[RECHECKS:]
    assert backoff == sorted(backoff) and backoff[0] == RECHECK * 2 and backoff[-1] == 1.0
    state.notified("12")  # a newer commit: rechecks start over
    assert state.wait() == RECHECK


def test_a_notification_without_a_transaction_id_rechecks_with_a_backoff() -> None:
    state = FollowState(None, 0.5, 10, listening=True)
    state.notified("")
    assert [state.wait() for _ in range(6)] == [0.02, 0.04, 0.08, 0.16, 0.32, 0.5]


def test_a_poller_starts_short_and_backs_off_to_the_poll() -> None:
    state = FollowState(None, 0.3, 10)
    waits = [state.wait() for _ in range(5)]
    assert waits == [POLL_START, 0.1, 0.2, 0.3, 0.3]
    state.read([_entry(0, 1)])
    assert state.wait() == POLL_START


def test_a_full_page_is_followed_by_the_next_at_once() -> None:
    state = FollowState(None, 1.0, 2)
    assert state.read([_entry(0, 1), _entry(0, 2)]) is True
    assert state.read([_entry(0, 3)]) is False
    assert state.cursor == "0.3"


def test_failures_back_off_and_a_good_read_resets_it() -> None:
    state = FollowState(None, 1.0, 10)
    delays = [state.failed() for _ in range(8)]
    assert delays[0] == RETRY_START and delays[-1] == RETRY_MAX
    assert delays == sorted(delays)
    state.read([])
    assert state.failed() == RETRY_START


@pytest.mark.parametrize("poll", [0, -0.5, float("nan"), 3601, True, "1"])
def test_a_bad_poll_is_refused(poll: object) -> None:
    with pytest.raises(InvalidArgumentError, match="poll"):
        FollowState(None, poll, 10)  # type: ignore[arg-type]
