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

from viewstore.domain.errors import (
    AgentServerError,
    ConcurrencyError,
    ConversationNotFoundError,
    ConversationOwnedError,
    InvalidEventError,
    SourceMismatchError,
)
from viewstore.domain.events import parse_event
from viewstore.ingest.agent_server import PAGE_LIMIT, AgentServerClient
from viewstore.store import EventStore, StoredEvent

log = logging.getLogger("viewstore.ingest")

#: The agent server's state updates: posted by its webhooks, in its log mostly (1.58.2 logs
#: the updates of a run) but not always (the snapshot posted when a subscriber attaches is in
#: no log). A posted id the log lacks is reported as ignored, never stored.
STATE_UPDATE = "ConversationStateUpdateEvent"
#: Events per append transaction when a pull brings many.
CHUNK = 500
ATTEMPTS = 20
#: Reads of the server's log (count, pages, count) before one whose count stood still.
STABLE_READS = 5


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


def optional_ids(batch: Sequence[dict[str, Any]]) -> frozenset[str]:
    """The posted ids the server's log may lack: its state updates (``STATE_UPDATE``)."""
    return frozenset(str(event["id"]) for event in batch if event.get("kind") == STATE_UPDATE)


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
    optional: frozenset[str] = frozenset(),
    attempts: int = ATTEMPTS,
) -> PullResult:
    """Store the server's events of conversation ``key`` up to the last of ``wanted`` (the
    posted ids, in order), or up to the end of the server's log when ``wanted`` is None.
    ``optional``: posted ids that may be missing from the server's log (state updates).

    Only the conversation's owner may pull it (``ConversationOwnedError`` otherwise): the
    source that stored its first events, claiming it once its log was read and checked."""
    retries = 0
    while True:
        try:
            result = _pull_once(store, client, key, wanted, optional)
        except ConcurrencyError:
            retries += 1
            if retries >= attempts:
                raise
            log.info("%s: another writer appended first; reading the tail again", key)
            time.sleep(random.uniform(0, min(0.5, 0.005 * 2**retries)))
            continue
        result.retries = retries
        return result


def stored_tail(store: EventStore, key: str) -> tuple[int, StoredEvent | None]:
    """The conversation's version and its last event ((0, None) when not stored)."""
    try:
        version = store.version(key)
    except ConversationNotFoundError:
        return 0, None
    if version == 0:
        return 0, None
    last = store.events(key, after=version - 1, limit=1)
    return version, last[0]


def _pull_once(
    store: EventStore,
    client: AgentServerClient,
    key: str,
    wanted: list[str] | None,
    optional: frozenset[str],
) -> PullResult:
    result = PullResult(key)
    source = client.source.name
    owner = store.conversation_owner(key)
    version, last = stored_tail(store, key)
    if owner != source and (owner is not None or version > 0):
        raise ConversationOwnedError(key, source, owner)
    result.version = version
    if wanted is not None:
        if not wanted:
            return result
        if version and store.event(key, wanted[-1]) is not None:  # the post's last is stored: so
            result.duplicates = len(wanted)  # are the ones before it (the server's order)
            return result
    fresh = read_log(store, client, key, version, last)
    if wanted is not None:
        stored = store if version else None
        fresh = _up_to_post(stored, client, key, fresh, wanted, optional, result)
    else:
        result.pulled = len(fresh)
    if owner is None and fresh:  # a new conversation: the first source to prove its log owns it
        store.claim_conversation(key, source)
    for start in range(0, len(fresh), CHUNK):
        chunk = fresh[start : start + CHUNK]
        appended = store.append(key, chunk, expected_version=version)
        version = appended.version
        result.appended += len(appended.appended)
    result.version = version
    if result.pulled and wanted is not None:
        log.info("%s: pulled %d event(s) missing before the post", key, result.pulled)
    return result


def _up_to_post(  # noqa: PLR0917 (one step of _pull_once, its state passed on)
    store: EventStore | None,
    client: AgentServerClient,
    key: str,
    fresh: list[dict[str, Any]],
    wanted: list[str],
    optional: frozenset[str],
    result: PullResult,
) -> list[dict[str, Any]]:
    """The server's events up to the post's last one, and what became of each posted id. A
    posted id that is in neither the store nor the server's log proves the log read is not
    this conversation's (or the server posted what it does not hold): 409, except a state
    update's, which the agent server posts without logging it (``STATE_UPDATE``). ``store``
    is None while the conversation holds no events."""
    where = {event["id"]: index for index, event in enumerate(fresh)}
    missing = [i for i in wanted if i not in where]
    absent = [i for i in missing if store is None or store.event(key, i) is None]
    foreign = [i for i in absent if i not in optional]
    if foreign:
        raise SourceMismatchError(
            key,
            client.source.name,
            f"{len(foreign)} posted event(s) are in neither the store nor the agent server's "
            f"log of this conversation (first: {foreign[0]!r}); nothing stored",
        )
    result.ignored = absent
    if absent:
        log.warning(
            "%s: %d posted state update(s) are not in %s's log: %s",
            key,
            len(absent),
            client.source.name,
            ", ".join(absent[:5]),
        )
    result.duplicates = len(missing) - len(absent)
    target = wanted[-1]
    if target in where:  # else the server's log ends without it: store what it has
        fresh = fresh[: where[target] + 1]
    result.pulled = len(fresh) - (len(wanted) - len(missing))
    return fresh


def read_log(
    store: EventStore,
    client: AgentServerClient,
    key: str,
    version: int,
    last: StoredEvent | None,
) -> list[dict[str, Any]]:
    """The server's events after the stored log, to the end of the server's log, once the
    server's log is shown to extend the stored one (else ``SourceMismatchError``): its
    page from the last stored event starts with that event, with the content the store holds,
    and the server's event count equals the stored version plus the events read after it (a
    hole in the search, an event moved, inserted or dropped before it all break the count).
    The count is read before and after the pages; while the log grows in between, the read is
    tried again (``STABLE_READS`` times, then ``AgentServerError``: the post is retried)."""
    for attempt in range(STABLE_READS):
        before = _count(client, key)
        first, fresh = _read_to_end(client, key, last, before)
        after = client.event_count(key)
        if before == after:
            break
        time.sleep(0.01 * 2**attempt)
    else:
        raise AgentServerError(
            client.source.name,
            f"the log of {key} kept growing while it was read ({STABLE_READS} tries)",
        )
    if last is not None:
        _check_same_event(store, client, key, last, first)
    if version + len(fresh) != after:
        raise SourceMismatchError(
            key,
            client.source.name,
            f"the agent server counts {after} event(s), but the store holds {version} and the "
            f"server's search gives {len(fresh)} after them: its search skips an event "
            "(unreadable on its disk?) or its log was rewritten; nothing stored",
        )
    return fresh


def _count(client: AgentServerClient, key: str) -> int:
    try:
        return client.event_count(key)
    except AgentServerError as error:
        if error.status == 404:  # no retry will find it: a refusal, not an outage
            raise SourceMismatchError(
                key, client.source.name, "the agent server has no such conversation"
            ) from error
        raise


def _check_same_event(
    store: EventStore,
    client: AgentServerClient,
    key: str,
    last: StoredEvent,
    first: dict[str, Any] | None,
) -> None:
    """The page asked for from the last stored event starts with that event, as stored (a
    redacted event differs from the server's copy by design: its id must match)."""
    if first is None or first["id"] != last.event_id:
        raise SourceMismatchError(
            key,
            client.source.name,
            f"its last stored event {last.event_id!r} is not in the agent server's log",
        )
    if _as_stored(store, first) != last.payload and not any(
        redaction.seq == last.seq for redaction in store.redactions(key)
    ):
        raise SourceMismatchError(
            key,
            client.source.name,
            f"the agent server's event {last.event_id!r} is not the one stored at seq "
            f"{last.seq} (other content under the same id); nothing stored",
        )


def _as_stored(store: EventStore, item: dict[str, Any]) -> dict[str, Any]:
    """The server's copy of an event as the store keeps it: masked by the store's rules."""
    if store.masking is None:
        return item
    try:
        masked, _ = store.masking.mask(parse_event(item))
    except InvalidEventError:
        return item  # not an event the store would take: it differs from the stored one
    return masked.payload


def _read_to_end(
    client: AgentServerClient, key: str, last: StoredEvent | None, count: int
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The server's event ``last`` (when given: the first item of its page) and every event
    after it (all of them when None), to the end of its log."""
    first_page = client.events(
        key, page_id=None if last is None else last.event_id, limit=PAGE_LIMIT
    )
    items = first_page.items
    first: dict[str, Any] | None = None
    if last is not None:
        if not items:
            return None, []
        first, items = items[0], items[1:]
    fresh: list[dict[str, Any]] = []
    seen: set[str] = set()
    next_page_id = first_page.next_page_id
    # A server that pages in circles is cut off: a page more than its count allows is a lie.
    pages_left = count // PAGE_LIMIT + 2
    while True:
        for item in items:
            if item["id"] in seen:
                raise SourceMismatchError(
                    key, client.source.name, f"its log repeats event {item['id']!r}"
                )
            seen.add(item["id"])
            fresh.append(item)
        if next_page_id is None:
            return first, fresh
        pages_left -= 1
        if pages_left < 0:
            raise SourceMismatchError(
                key, client.source.name, f"its log goes on past the {count} events it counts"
            )
        page = client.events(key, page_id=next_page_id, limit=PAGE_LIMIT)
        if not page.items or page.items[0]["id"] != next_page_id:
            raise SourceMismatchError(
                key, client.source.name, "the agent server's log changed while it was read"
            )
        items, next_page_id = page.items, page.next_page_id
