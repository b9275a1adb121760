"""What the store hands back: plain, immutable records."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from viewstore.store.cursors import Order, catalogue_cursor, check_order
from viewstore.store.read.stored_events import StoredEvents

if TYPE_CHECKING:
    from viewstore.domain.events import Event
    from viewstore.domain.masking import Masked


@dataclass(frozen=True)
class StoredEvent:
    conversation_id: str
    seq: int
    event_id: str
    kind: str
    payload_json: str
    recorded_at: datetime
    hash: str

    @property
    def payload(self) -> dict[str, Any]:
        """The exact JSON object that was appended (a fresh copy)."""
        value: dict[str, Any] = json.loads(self.payload_json)
        return value


@dataclass(frozen=True)
class StoredView:
    """A conversation's view: what the LLM is sent, and where a condenser may cut.

    Read from the store, ``events`` is a :class:`StoredEvents` that builds each Event on first
    access; ``event_ids`` and ``payloads`` never need them.
    """

    conversation_id: str
    version: int
    events: Sequence[Event]
    manipulation_indices: list[int]
    unhandled_condensation_request: bool
    as_of: int | None = None

    @property
    def event_ids(self) -> list[str]:
        if isinstance(self.events, StoredEvents):
            return self.events.ids()
        return [event.id for event in self.events]

    @property
    def payloads(self) -> list[str]:
        """Each event's exact JSON text, in view order (a summary: its synthesized event)."""
        if isinstance(self.events, StoredEvents):
            return self.events.payloads()
        return [event.payload_json for event in self.events]

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "version": self.version,
            "event_ids": self.event_ids,
            "manipulation_indices": list(self.manipulation_indices),
            "unhandled_condensation_request": self.unhandled_condensation_request,
        }


@dataclass(frozen=True)
class ViewPage:
    """A window of a view (``store.view_page()``): ``view`` holds the events at positions
    ``first`` to ``first + len(view.events) - 1`` of the ``length`` the whole view has, and
    the whole view's manipulation indices and request flag."""

    view: StoredView
    length: int
    first: int


@dataclass(frozen=True)
class AppendResult:
    conversation_id: str
    version: int
    appended: list[str] = field(default_factory=list)  # ids written by this call, in order
    duplicates: list[str] = field(default_factory=list)  # ids already stored, same payload
    first_seq: int | None = None
    rows_written: int = 0  # view-entry and index rows inserted or closed

    @property
    def created(self) -> bool:
        return self.first_seq == 1


@dataclass
class ConversationReport:
    conversation_id: str
    version: int
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # differences that are not faults

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class VerifyReport:
    conversations: list[ConversationReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(report.ok for report in self.conversations)

    @property
    def problems(self) -> list[str]:
        return [
            f"{report.conversation_id}: {problem}"
            for report in self.conversations
            for problem in report.problems
        ]

    def render(self) -> str:
        lines = []
        for report in self.conversations:
            status = "ok" if report.ok else "PROBLEMS"
            lines.append(f"{report.conversation_id} (version {report.version}): {status}")
            lines.extend(f"  - {problem}" for problem in report.problems)
            lines.extend(f"  . {note}" for note in report.notes)
        ok = sum(report.ok for report in self.conversations)
        lines.append(f"{ok}/{len(self.conversations)} conversations verified")
        return "\n".join(lines)


@dataclass(frozen=True)
class CondensationRecord:
    """A stored condensation: its seq and id, summary, where the summary went, and each id it
    forgot with whether that event was in the view when it was forgotten."""

    seq: int
    event_id: str
    summary: str | None
    summary_offset: int | None
    forgotten: tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class ForkOrigin:
    """Where a fork (``store.fork()``) comes from: its events up to ``at_seq`` are those of
    ``source``; ``family_id`` is the first conversation of its line, shared by every fork of
    it and of its forks."""

    source: str
    at_seq: int
    family_id: str

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "at_seq": self.at_seq, "family_id": self.family_id}


#: How the record of a policy's ``redact_after`` names the policy (``redact after 90d``). A
#: policy a record names means compaction unless it starts so: compaction's records have
#: always named theirs otherwise (``compact after 30d``, or what ``store.compact`` was given,
#: which may not start so), and those stored before the rule existed keep meaning compacted.
REDACTED_BY_POLICY = "redact after "


@dataclass(frozen=True)
class Redaction:
    """One redaction of an event (``store.redact()``): which event, which JSON paths (None:
    all its content), why, when and (PostgreSQL) by which database user, and what ``verify``
    checks it by: the chain hashes around the event, the SHA-256 digests of its payload
    before and after, and (events hashed under chain scheme 2) ``leaf_digests``: the JSON text
    of an object giving, by JSON Pointer, the leaf digest of each string this round replaced
    (docs/lifecycle.md). None on a record of an event hashed before scheme 2.

    ``policy``: set on a record retention wrote (docs/retention.md), naming the policy. A
    compaction's (``compacted``): its event's content reads ``[compacted]`` instead of
    ``[redacted]``. A policy's ``redact_after`` rule's (``redact after 90d``,
    ``REDACTED_BY_POLICY``): a redaction like a user's, ``[redacted]``, only written by a
    policy."""

    conversation_id: str
    seq: int
    round: int
    event_id: str
    paths: tuple[str, ...] | None
    reason: str
    redacted_at: datetime
    redacted_by: str | None
    previous_hash: str
    event_hash: str
    removed_digest: str
    redacted_digest: str
    record_hash: str
    leaf_digests: str | None = None
    policy: str | None = None

    @property
    def compacted(self) -> bool:
        """Whether retention's compaction wrote this record (not a redaction, a user's or a
        policy's)."""
        return self.policy is not None and not self.policy.startswith(REDACTED_BY_POLICY)

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "seq": self.seq,
            "round": self.round,
            "event_id": self.event_id,
            "paths": None if self.paths is None else list(self.paths),
            "reason": self.reason,
            "redacted_at": self.redacted_at.isoformat(),
            "redacted_by": self.redacted_by,
            "removed_digest": self.removed_digest,
            "redacted_digest": self.redacted_digest,
            "policy": self.policy,
        }


@dataclass(frozen=True)
class CompactionReport:
    """What ``store.compact()`` did (or, ``dry_run``, would do): the conversations looked at,
    the events whose content it removed and the bytes that freed (payload less the records'
    leaf digests), and what it left: events whose removal would free less than the minimum
    (``small``), whose link in the chain does not hold or cannot be checked
    (``unverifiable``: ``verify`` says why), and conversations another writer held (``busy``,
    PostgreSQL: the next run takes them). docs/retention.md."""

    cutoff: datetime
    policy: str
    dry_run: bool
    conversations: int
    events: int
    bytes_freed: int
    small: int
    unverifiable: int
    busy: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cutoff": self.cutoff.isoformat()}


@dataclass(frozen=True)
class RetentionReport:
    """What ``store.apply_retention()`` did (or, ``dry_run``, would do): the conversations it
    erased for being idle, and what compacting the others took and left (as
    :class:`CompactionReport` counts them); then what their ``redact_after`` redacted: the
    conversations with the rule, the events and the bytes that freed (less the records: a
    small event's can be negative, and it is redacted all the same). ``busy`` counts each
    conversation another transaction held once; ``unverifiable``, the events either pass left
    (an old forgotten event, once per pass). docs/retention.md."""

    dry_run: bool
    erased: tuple[str, ...]
    compacted_conversations: int
    events: int
    bytes_freed: int
    small: int
    unverifiable: int
    busy: int
    redacted_conversations: int = 0
    redacted: int = 0
    redacted_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "erased": list(self.erased)}


@dataclass(frozen=True)
class Tombstone:
    """What is left of an erased conversation (``store.erase()``): how many events it had,
    the hash its chain ended on, when it was created, last appended to and erased, why, and
    (PostgreSQL) by which database user."""

    conversation_id: str
    events: int
    last_hash: str
    created_at: datetime
    updated_at: datetime
    erased_at: datetime
    reason: str
    erased_by: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "events": self.events,
            "last_hash": self.last_hash,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "erased_at": self.erased_at.isoformat(),
            "reason": self.reason,
            "erased_by": self.erased_by,
        }


@dataclass(frozen=True)
class ViewSizes:
    """Live view lengths over a store's conversations (an empty view counts as 0)."""

    min: int
    mean: float
    max: int
    total: int


@dataclass(frozen=True)
class StoreStats:
    """Store-wide counts (:meth:`EventStore.stats`). ``exact`` says, per count, whether it
    is a count (True) or an estimate or bound (the fast form on a large table). The fast form
    gives no ``view_sizes`` and no ``events_by_kind`` (None)."""

    conversations: int
    events: int
    condensations: int
    exact: dict[str, bool]
    view_sizes: ViewSizes | None
    events_by_kind: dict[str, int] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "events": self.events,
            "condensations": self.condensations,
            "exact": dict(self.exact),
            "view_sizes": None if self.view_sizes is None else vars(self.view_sizes).copy(),
            "events_by_kind": None if self.events_by_kind is None else dict(self.events_by_kind),
        }


@dataclass(frozen=True)
class ConversationInfo:
    """One conversation in the catalogue (``store.conversations()``).

    ``id``: the conversation id; ``created_at`` / ``updated_at``: when its first and its last
    append committed (UTC); ``version``: how many events it has; ``view_length``: how many
    events its live view holds now; ``unhandled_condensation_request``: whether a condensation
    request waits for its condensation; ``last_event_kind``: the ``kind`` of its last event.

    What its agent server last said of it (written by ``viewstore ingest`` and ``sync``; None
    where none did): ``title``, ``agent_server`` (that server's name in the ingest's sources
    file), ``execution_status`` and ``llm_model``; ``store.conversation_info()`` has the rest.

    ``first_message``: the text of its first user message, on one line and cut to
    ``FIRST_MESSAGE_CHARS`` (None if none is among its first ``FIRST_MESSAGE_WITHIN`` events).
    ``display_title`` is what a list calls it: the agent server's title, else that message.
    """

    id: str
    created_at: datetime
    updated_at: datetime
    version: int
    view_length: int
    unhandled_condensation_request: bool
    last_event_kind: str | None
    title: str | None = None
    agent_server: str | None = None
    execution_status: str | None = None
    llm_model: str | None = None
    first_message: str | None = None

    @property
    def display_title(self) -> str | None:
        """The agent server's title, else the first user message (None: neither)."""
        return self.title or self.first_message

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the same keys and ``display_title``, times as ISO 8601 text."""
        return {
            "id": self.id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "version": self.version,
            "view_length": self.view_length,
            "unhandled_condensation_request": self.unhandled_condensation_request,
            "last_event_kind": self.last_event_kind,
            "title": self.title,
            "agent_server": self.agent_server,
            "execution_status": self.execution_status,
            "llm_model": self.llm_model,
            "first_message": self.first_message,
            "display_title": self.display_title,
        }

    def cursor(self, order_by: Order = "id", descending: bool = False) -> str:
        """The keyset cursor of this row in that order: ``conversations(order_by=order_by,
        descending=descending, after=cursor)`` lists the rows that come after it."""
        value = None if order_by == "id" else getattr(self, check_order(order_by))
        return catalogue_cursor(order_by, descending, value, self.id)


@dataclass(frozen=True)
class ConversationPage:
    """A page of the catalogue (``store.conversation_page()``): its conversations, and the
    cursor of the next page (None: this is the last one)."""

    conversations: list[ConversationInfo]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversations": [record.to_dict() for record in self.conversations],
            "next_cursor": self.next_cursor,
        }


@dataclass(frozen=True)
class FeedEntry:
    """One event in the change feed; pass ``cursor`` as ``after`` to continue past it."""

    cursor: str
    conversation_id: str
    seq: int
    event_id: str
    kind: str


@dataclass(frozen=True)
class SourceInfo:
    """One conversation as its agent server describes it."""

    conversation_id: str
    source: str  # the agent server's name in the ingest's sources file
    title: str | None = None
    execution_status: str | None = None  # idle, running, paused, finished, error, stuck, ...
    agent_kind: str | None = None
    llm_model: str | None = None
    created_at: datetime | None = None  # the agent server's times
    updated_at: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    recorded_at: datetime | None = None  # when the store last wrote the row


@dataclass(frozen=True)
class BaseState:
    """The newest base state of a conversation, and how far behind its log it may be."""

    conversation_id: str
    payload: str  # the JSON text as written
    revision: int  # 1 for the first write, +1 for each later one
    at_version: int  # the conversation version its writer had seen
    version: int  # the conversation version when this was read

    @property
    def behind(self) -> int:
        """Events appended after the snapshot was taken (a writer that died in between)."""
        return self.version - self.at_version


@dataclass(frozen=True)
class RunnerClaim:
    """A lease claimed: its generation, and the server it was taken over from (None when it
    was free or already ours)."""

    generation: int
    taken_from: str | None


@dataclass(frozen=True)
class ServerConversation:
    """One conversation as a store-backed agent server keeps it."""

    conversation_id: str
    meta: str | None  # the server's meta.json, as it wrote it
    created_at: datetime
    updated_at: datetime
    runner: str | None  # the server holding the lease, None when released
    generation: int
    lease_expires_at: datetime | None
    execution_status: str | None = None  # in the stored base state (None: no base state)


@dataclass(frozen=True)
class MaskRecord:
    """What masking changed in one event before it was stored (docs/masking.md): each string
    (``Masked.path``, a JSON Pointer), the rule and how many matches. ``record_hash`` binds it
    to the event's chain hash, so ``verify`` finds a record moved or altered."""

    conversation_id: str
    seq: int
    event_id: str
    masked: tuple[Masked, ...]
    record_hash: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "seq": self.seq,
            "event_id": self.event_id,
            "masked": [item.to_dict() for item in self.masked],
        }


@dataclass(frozen=True)
class SearchHit:
    """An event a search found (docs/search.md): where it is stored (the conversation whose log
    holds it, and its seq there), what it is, its rank (higher is better; comparable within
    one search only) and a snippet of its text around the first word found. ``in_live_view``:
    whether the conversation searched (store-wide: the one that holds it) has it in its live
    view now."""

    conversation_id: str
    seq: int
    event_id: str
    kind: str
    source: str | None
    timestamp: str | None
    recorded_at: datetime
    rank: float
    snippet: str
    in_live_view: bool

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recorded_at": self.recorded_at.isoformat()}


@dataclass(frozen=True)
class SearchPage:
    """One page of a search, best first; ``next_cursor`` (None: the last page) is what
    ``search(..., after=)`` takes for the next."""

    hits: list[SearchHit]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"hits": [hit.to_dict() for hit in self.hits], "next_cursor": self.next_cursor}
