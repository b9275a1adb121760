"""Bring a conversation's stored log up to its agent server's log, in the server's order,
exactly once, and never past a gap.

The stored log of an ingested conversation is always a prefix of the agent server's log
(positions: stored seq ``n`` is the server's event ``n - 1``). Webhook posts can be dropped,
retried, duplicated or reordered, and an event carries no position of its own (``parent_id``
does not chain one event to the next: parallel tool calls share a parent). So a post is taken
as a request: "the store should hold these event ids". The pull then reads the server's log
from the last stored event on (``events/search?page_id=<last stored id>``, inclusive, so the
page must start with that event) until it has seen the post's last event, and appends what it
read after the stored log, in order, with ``expected_version`` = the stored version:

- a batch that continues the stored log costs one REST page (``limit`` = batch + 1);
- a batch after a gap also pulls the missing events, which come first in the server's order;
- a batch whose last event is stored is a resend: nothing is read or written;
- a concurrent writer (another ingest process, ``viewstore sync``) makes the append raise
  ``ConcurrencyError``; the pull starts over from the new stored tail.

What is appended is the server's copy of each event (as its REST API returns it: JSON
without null fields), never the posted body: every event of a conversation comes from the
same place, a resend can never clash with a stored copy, and a posted body cannot add an
event the server does not have.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from viewstore.errors import ConcurrencyError, ConversationNotFoundError, SourceMismatchError
from viewstore.ingest.agent_server import PAGE_LIMIT, AgentServerClient
from viewstore.store import EventStore

log = logging.getLogger("viewstore.ingest")

#: The agent server's state updates: posted by its webhooks, in its log mostly (1.58.2 logs
#: the updates of a run) but not always (the snapshot posted when a subscriber attaches is in
#: no log). A posted id the log lacks is reported as ignored, never stored.
STATE_UPDATE = "ConversationStateUpdateEvent"
#: Events per append transaction when a pull brings many.
CHUNK = 500
ATTEMPTS = 20


@dataclass
class PullResult:
    conversation_id: str
    version: int = 0
    appended: int = 0  # events appended by this pull
    pulled: int = 0  # of them, events the post did not carry (a gap, or the tail)
    duplicates: int = 0  # posted events that were already stored
    ignored: list[str] = field(default_factory=list)  # posted ids the server's log lacks
    retries: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "version": self.version,
            "appended": self.appended,
            "pulled": self.pulled,
            "duplicates": self.duplicates,
            "ignored": self.ignored,
        }


def wanted_ids(batch: Sequence[dict[str, Any]]) -> list[str]:
    """The ids of a posted batch, in order."""
    return [str(event["id"]) for event in batch]


#: State updates that change nothing the catalogue keeps (the agent server 1.58.2 logs a
#: ``stats`` update after every LLM call: refreshing the info on each cost a third of a post).
NOT_INFO = frozenset({"stats"})


def changes_state(batch: Sequence[dict[str, Any]]) -> bool:
    """Whether the batch reports a change of the conversation's state that the catalogue
    keeps (its execution status, its agent, a full snapshot...): every state update but
    those of ``NOT_INFO``."""
    return any(
        event.get("kind") == STATE_UPDATE and event.get("key") not in NOT_INFO for event in batch
    )


def pull(
    store: EventStore,
    client: AgentServerClient,
    key: str,
    wanted: list[str] | None,
    *,
    attempts: int = ATTEMPTS,
) -> PullResult:
    """Store the server's events of conversation ``key`` up to the last of ``wanted`` (the
    posted ids, in order), or up to the end of the server's log when ``wanted`` is None."""
    retries = 0
    while True:
        try:
            result = _pull_once(store, client, key, wanted)
        except ConcurrencyError:
            retries += 1
            if retries >= attempts:
                raise
            log.info("%s: another writer appended first; reading the tail again", key)
            time.sleep(random.uniform(0, min(0.5, 0.005 * 2**retries)))
            continue
        result.retries = retries
        return result


def stored_tail(store: EventStore, key: str) -> tuple[int, str | None]:
    """The conversation's version and its last event's id ((0, None) when not stored)."""
    try:
        version = store.version(key)
    except ConversationNotFoundError:
        return 0, None
    if version == 0:
        return 0, None
    last = store.events(key, after=version - 1, limit=1)
    return version, last[0].event_id


def _pull_once(
    store: EventStore, client: AgentServerClient, key: str, wanted: list[str] | None
) -> PullResult:
    result = PullResult(key)
    version, last_id = stored_tail(store, key)
    result.version = version
    target = wanted[-1] if wanted else None
    if wanted is not None:
        if not wanted:
            return result
        if version and store.event(key, wanted[-1]) is not None:  # the post's last is stored: so
            result.duplicates = len(wanted)  # are the ones before it (the server's order)
            return result
    fresh = _read_after(client, key, last_id, target, len(wanted) if wanted else PAGE_LIMIT)
    if wanted is not None:
        seen = {event["id"] for event in fresh}
        missing = [i for i in wanted if i not in seen]
        if target not in seen:  # the server's log ends without it: store what it has
            result.ignored = [i for i in missing if not version or store.event(key, i) is None]
            log.warning(
                "%s: %d posted event(s) are not in %s's log: %s",
                key,
                len(result.ignored),
                client.source.name,
                ", ".join(result.ignored[:5]),
            )
        result.duplicates = len(missing) - len(result.ignored)
        result.pulled = len(fresh) - (len(wanted) - len(missing))
    else:
        result.pulled = len(fresh)
    for start in range(0, len(fresh), CHUNK):
        chunk = fresh[start : start + CHUNK]
        appended = store.append(key, chunk, expected_version=version)
        version = appended.version
        result.appended += len(appended.appended)
    result.version = version
    if result.pulled and wanted is not None:
        log.info("%s: pulled %d event(s) missing before the post", key, result.pulled)
    return result


def _read_after(
    client: AgentServerClient, key: str, last_id: str | None, target: str | None, batch: int
) -> list[dict[str, Any]]:
    """The server's events after ``last_id`` (all of them when None) up to and including
    ``target`` (to the end of the log when None or absent)."""
    first = client.events(key, page_id=last_id, limit=batch + (last_id is not None))
    items = first.items
    if last_id is not None:
        if not items or items[0]["id"] != last_id:
            raise SourceMismatchError(
                key,
                client.source.name,
                f"its last stored event {last_id!r} is not in the agent server's log",
            )
        items = items[1:]
    fresh: list[dict[str, Any]] = []
    next_page_id = first.next_page_id
    while True:
        for item in items:
            fresh.append(item)
            if item["id"] == target:
                return fresh
        if next_page_id is None:
            return fresh
        page = client.events(key, page_id=next_page_id, limit=PAGE_LIMIT)
        if not page.items or page.items[0]["id"] != next_page_id:
            raise SourceMismatchError(
                key, client.source.name, "the agent server's log changed while it was read"
            )
        items, next_page_id = page.items, page.next_page_id
