"""Worker processes for the concurrent lifecycle machine (tests/ops/test_lifecycle_race.py).

Each worker runs random operations on shared fork families: appends (messages, tool calls,
condensations), forks (of forks; at a head, inside a shared prefix, at an ancestor's head),
redactions, erasures and compactions (docs/retention.md). It reports what the store
acknowledged, so the test can check that every acknowledged append is stored once, that no
redacted content survives anywhere, and that every conversation still equals its replay.

Every text an event carries holds a token ``<secret-ID>`` naming the event, delimited so that
no token is a substring of another: once an event is redacted its token must be found in no
row of any table. Some messages also carry a key (``key_of``) that every worker's store masks
before storing it (docs/masking.md): it must be found in no row at all. A retention step
applies a policy whose ``redact_after`` of 0s redacts all of one conversation's own log.
"""

from __future__ import annotations

import hashlib
import random
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from viewstore import (
    CompactedHistoryError,
    ConcurrencyError,
    ConversationErasedError,
    ConversationHasForksError,
    ConversationNotFoundError,
    EventStore,
    InvalidArgumentError,
    MaskingRules,
    RetentionPolicy,
    StoredView,
    append_with_retry,
)
from viewstore.store.read.sizes import SIZE_ORDERS

#: Errors another worker's operation can cause legitimately; anything else fails the test.
#: CompactedHistoryError: a fork into history a racing compaction removed the content of.
EXPECTED = (
    CompactedHistoryError,
    ConversationErasedError,
    ConversationHasForksError,
    ConversationNotFoundError,
)
VIEW_CAP = 10  # condense a view this long, so condensations happen inside tool loops too


#: The rule every worker's store masks by.
MASKING = MaskingRules.from_toml("[[rules]]\nname = 'race-key'\npattern = 'sk-race-[0-9a-f]{24}'")
KEY_PREFIX = "sk-race-"


def token(event_id: str) -> str:
    return f"<secret-{event_id}>"


def key_of(event_id: str) -> str:
    return KEY_PREFIX + hashlib.sha256(event_id.encode()).hexdigest()[:24]


def _message(eid: str, *, keyed: bool = False) -> dict[str, Any]:
    said = f"{token(eid)} key {key_of(eid)}" if keyed else token(eid)
    return {
        "id": eid,
        "source": "user",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": said}]},
        "kind": "MessageEvent",
    }


def _action(eid: str, call: str, response: str) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "agent",
        "thought": [{"type": "text", "text": token(eid)}],
        "thinking_blocks": [],
        "action": {"command": token(eid), "kind": "TerminalAction"},
        "tool_name": "terminal",
        "tool_call_id": call,
        "llm_response_id": response,
        "kind": "ActionEvent",
    }


def _observation(eid: str, call: str, action_id: str) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "environment",
        "tool_name": "terminal",
        "tool_call_id": call,
        "action_id": action_id,
        "observation": {
            "content": [{"type": "text", "text": token(eid)}],
            "kind": "TerminalObservation",
        },
        "kind": "ObservationEvent",
    }


def _condensation(eid: str, forgotten: list[str]) -> dict[str, Any]:
    return {
        "id": eid,
        "source": "environment",
        "forgotten_event_ids": forgotten,
        "summary": f"summary {token(eid)}",
        "summary_offset": 0,
        "kind": "Condensation",
    }


def _batch(rng: random.Random, prefix: str, view: StoredView | None) -> list[dict[str, Any]]:
    """A step's events: a message, a batch of parallel tool calls with their results (some
    left open: an observation may then arrive in a later step, or never), or a condensation
    when the view is long (which may cut a tool batch)."""
    ids = [] if view is None else [e for e in view.event_ids if not e.endswith("-summary")]
    if len(ids) >= VIEW_CAP and rng.random() < 0.6:
        forget = rng.sample(ids, rng.randint(1, len(ids) // 2))
        return [_condensation(f"{prefix}c", forget)]
    if rng.random() < 0.4:
        return [_message(f"{prefix}m", keyed=rng.random() < 0.5)]
    calls = rng.randint(1, 3)
    response = f"{prefix}r"
    actions = [_action(f"{prefix}a{k}", f"{prefix}t{k}", response) for k in range(calls)]
    answered = calls if rng.random() < 0.8 else rng.randint(0, calls - 1)
    results = [
        _observation(f"{prefix}o{k}", f"{prefix}t{k}", f"{prefix}a{k}") for k in range(answered)
    ]
    return actions + results


def _family(store: EventStore) -> list[Any]:
    with store.engine.connect() as conn:
        return list(
            conn.execute(text("SELECT id, forked_from, fork_seq, version FROM conversations"))
        )


class _Worker:
    def __init__(self, store: EventStore, worker: int, seed: int) -> None:
        self.store = store
        self.worker = worker
        self.rng = random.Random(seed)
        self.appended: list[tuple[str, list[str]]] = []
        self.forks: list[tuple[str, str, int]] = []
        self.redacted: list[tuple[str, str]] = []
        self.erased: list[str] = []
        self.counts = {
            "append": 0,
            "fork": 0,
            "redact": 0,
            "erase": 0,
            "sizes": 0,
            "compact": 0,
            "retention": 0,
            "refused": 0,
        }
        self.conflicts = 0

    def append(self, conv: str, step: int) -> None:
        prefix = f"w{self.worker}s{step}"
        decided: list[list[dict[str, Any]]] = []

        def decide(view: StoredView | None) -> list[dict[str, Any]]:
            decided.append(_batch(self.rng, prefix + "x" * len(decided), view))
            return decided[-1]

        def count(_error: ConcurrencyError, _attempt: int) -> None:
            self.conflicts += 1

        append_with_retry(
            self.store,
            conv,
            decide,
            attempts=200,
            backoff=0.001,
            max_backoff=0.02,
            on_conflict=count,
        )
        self.appended.append((conv, [event["id"] for event in decided[-1]]))
        self.counts["append"] += 1

    def fork(self, row: Any, step: int) -> None:
        version = int(row.version)
        if version == 0:
            return
        choice = self.rng.random()
        if choice < 0.3:
            at = version  # at the head
        elif row.fork_seq is not None and choice < 0.6:
            at = int(row.fork_seq)  # at an ancestor's head, inside the shared prefix
        elif row.fork_seq is not None and choice < 0.8:
            at = self.rng.randint(1, int(row.fork_seq))  # inside the shared prefix
        else:
            at = self.rng.randint(1, version)
        new = f"w{self.worker}f{step}"
        self.store.fork(row.id, at, new)
        self.forks.append((new, row.id, at))
        self.counts["fork"] += 1

    def redact(self, conv: str) -> None:
        events = self.store.events(conv)
        if not events:
            return
        chosen = self.rng.choice(events)
        try:
            self.store.redact(conv, chosen.event_id, reason="race")
        except InvalidArgumentError as error:
            if "nothing left" not in str(error):
                raise
            return  # redacted already, by someone
        self.redacted.append((conv, chosen.event_id))
        self.counts["redact"] += 1

    def erase(self, rows: list[Any]) -> None:
        sources = {row.forked_from for row in rows}
        leaves = [row.id for row in rows if row.id not in sources and not row.id.startswith("root")]
        if not leaves:
            return
        conv = self.rng.choice(leaves)
        self.store.erase(conv, reason="race")
        self.erased.append(conv)
        self.counts["erase"] += 1

    def step(self, step: int) -> None:
        rows = _family(self.store)
        # Half the time an ancestor: the races are between a family's root and its forks.
        roots = [row for row in rows if row.id.startswith("root")]
        row = self.rng.choice(roots if roots and self.rng.random() < 0.5 else rows)
        choice = self.rng.random()
        if choice < 0.42:
            self.append(row.id, step)
        elif choice < 0.70:
            self.fork(row, step)
        elif choice < 0.87:
            self.redact(row.id)
        elif choice < 0.92:
            self.erase(rows)
        elif choice < 0.95:
            self.compact(row.id)
        elif choice < 0.97:
            self.retain(row.id)
        else:
            self.sizes()

    def retain(self, conv: str) -> None:
        """A retention policy whose one rule redacts all of ``conv``'s own log (docs/retention.md,
        ``redact_after``): it races the appends, forks, redactions and compactions of the same
        events."""
        policy = RetentionPolicy.from_toml(f'[conversations."{conv}"]\nredact_after = "0s"\n')
        self.store.apply_retention(policy, pace=0)
        self.counts["retention"] += 1

    def compact(self, conv: str) -> None:
        """Compaction of one conversation, or of the whole store, at age 0 and whatever the
        bytes (these events are small): it races the appends that condense, the forks that
        would hold or start inside what it removes, the redactions of the same events."""
        whole = self.rng.random() < 0.3
        self.store.compact(
            None if whole else conv,
            older_than=timedelta(0),
            min_freed=-(10**6),
            batch=self.rng.choice([1, 3, 500]),
        )
        self.counts["compact"] += 1

    def sizes(self) -> None:
        """The catalogue's size copies refreshed (all of them, or what changed) and read in
        a size order, racing the appends, forks and erasures that change what they copy."""
        self.store.refresh_catalogue_sizes(full=self.rng.random() < 0.3)
        order = self.rng.choice(SIZE_ORDERS)
        self.store.conversations(order_by=order, descending=self.rng.random() < 0.5, limit=5)
        self.counts["sizes"] += 1


def lifecycle_worker(url: str, worker: int, steps: int, seed: int) -> dict[str, Any]:
    errors: list[str] = []
    with EventStore(url, masking=MASKING) as store:
        state = _Worker(store, worker, seed)
        for step in range(steps):
            try:
                state.step(step)
            except EXPECTED:
                state.counts["refused"] += 1
            except Exception as error:  # every other error is reported to the test, which fails
                errors.append(f"step {step}: {type(error).__name__}: {error}")
    return {
        "worker": worker,
        "errors": errors,
        "appended": state.appended,
        "forks": state.forks,
        "redacted": state.redacted,
        "erased": state.erased,
        "counts": state.counts,
        "conflicts": state.conflicts,
    }
