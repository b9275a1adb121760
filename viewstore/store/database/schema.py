"""The tables, as SQLAlchemy Core metadata.

The Alembic revisions freeze their own copies of these shapes; ``alembic check`` (run by the
tests) proves the two agree. Names follow one convention so migrations can address constraints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

SchemaItemT = TypeVar("SchemaItemT", Index, UniqueConstraint)


def only_on(dialect: str, item: SchemaItemT) -> SchemaItemT:
    """An index or constraint that exists on one backend only: created there (``ddl_if``), and
    compared with the database there only (``compared_on``)."""
    item.info["only_on"] = dialect
    item.ddl_if(dialect=dialect)
    return item


#: Indexes a store has or not, by what its server offers, so no drift either way: the trigram
#: index of the catalogue's search, where PostgreSQL has pg_trgm (docs/schema.md).
OPTIONAL_INDEXES = frozenset({"ix_conversations_id_trgm"})
#: What the baseline alone makes, the models do not hold, and Alembic cannot compare: the
#: full-text search over the log (docs/search.md), PostgreSQL's expression index and SQLite's
#: FTS5 table with the shadow tables FTS5 keeps.
SEARCH_INDEX = "ix_events_search"
SEARCH_TABLE = "events_search"


def compared_on(dialect: str) -> Callable[..., bool]:
    """Alembic's ``include_object`` for a database of ``dialect``: leaves out what
    ``only_on`` gave to the other backend (used by migrations/env.py and the drift tests)."""

    def include_object(obj: Any, name: str | None = None, type_: str = "", *_: Any) -> bool:
        if type_ == "index" and name in OPTIONAL_INDEXES | {SEARCH_INDEX}:
            return False
        if type_ == "table" and name is not None and name.startswith(SEARCH_TABLE):
            return False
        only = getattr(obj, "info", {}).get("only_on")
        return only is None or only == dialect

    return include_object


ID = String(512)
CONVERSATION_ID = String(255)
# Order keys are digit strings compared byte by byte; PostgreSQL must not apply a locale.
ORDER_KEY = Text().with_variant(Text(collation="C"), "postgresql")

conversations = Table(
    "conversations",
    metadata,
    Column("id", CONVERSATION_ID, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("version", BigInteger, nullable=False),
    # The projector's carried state (viewstore.domain.projector.ProjectionState).
    Column("unhandled_request", Boolean, nullable=False),
    Column("view_length", Integer, nullable=False),
    Column("pending_tool_calls", Text, nullable=False),  # JSON array of tool-call ids
    Column("in_tool_loop", Boolean, nullable=False),
    Column("last_is_action", Boolean, nullable=False),
    Column("last_batch", Text, nullable=True),
    Column("last_hash", String(64), nullable=False),
    # A fork (viewstore.store.lifecycle.forking): its events up to fork_seq are forked_from's.
    # family_id is the first conversation of its line; all three are NULL on a conversation that
    # is not a fork.
    Column("forked_from", CONVERSATION_ID, nullable=True),
    Column("fork_seq", BigInteger, nullable=True),
    Column("family_id", CONVERSATION_ID, nullable=True),
    PrimaryKeyConstraint("id"),
    Index(None, "forked_from"),
    # The catalogue's orders kept by every append (viewstore.store.read.catalogue), each with id
    # as its tie-breaker so the order is total and a keyset page starts right after its cursor;
    # read backwards for a descending order. updated_at also serves updated_since, the inactive
    # scan and the sizes' refresh. The orders by version and view length, which an append
    # would move on every event, are catalogue_sizes' (docs/schema.md).
    *(Index(None, column, "id") for column in ("created_at", "updated_at")),
)

# The catalogue's orders by size (version, view_length), out of the append's way: a copy of
# each conversation's two figures that the catalogue's readers bring up to date from the
# updated_at index before they read them (viewstore.store.read.sizes), so an append writes no
# index of either. A row is inserted with its conversation, with updated_at NULL (never
# refreshed); updated_at is the conversation's as of the refresh that copied the figures.
catalogue_sizes = Table(
    "catalogue_sizes",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=True),
    Column("version", BigInteger, nullable=False),
    Column("view_length", Integer, nullable=False),
    PrimaryKeyConstraint("conversation_id"),
    ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
    Index(None, "updated_at"),
    *(Index(None, column, "conversation_id") for column in ("version", "view_length")),
)

events = Table(
    "events",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", ID, nullable=False),
    Column("kind", String(255), nullable=False),
    Column("source", String(255), nullable=True),
    Column("timestamp", String(64), nullable=True),
    Column("parent_id", ID, nullable=True),
    Column("payload", Text, nullable=False),
    Column("hash", String(64), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    # Change feed: a global position, and on PostgreSQL the writing transaction's id, so a
    # reader can stay below every transaction still in flight.
    Column("position", BigInteger, nullable=False),
    Column("txid", BigInteger, nullable=False),
    PrimaryKeyConstraint("conversation_id", "seq"),
    # One event id per conversation. On PostgreSQL a partial index over every row (event_id is
    # never NULL), which the planner considers only for a statement whose event-id condition
    # implies its predicate: a statement about a conversation's rows by seq then has only the
    # primary key to read them by. As a constraint, a store never analyzed priced the two alike
    # and read conversations through this one, filtering seq, quadratic in their length
    # (tests/store/test_unanalyzed_plans.py). The conversation id stays first: a conversation's
    # ids share leaf pages, where with the event id (a random UUID) first each append wrote a
    # page image of its own after a checkpoint (about 7.0 against 1.2-1.7 kB of WAL an append to
    # hot conversations of a 300,000-event log; docs/schema.md).
    only_on("sqlite", UniqueConstraint("conversation_id", "event_id")),
    only_on(
        "postgresql",
        Index(
            "ix_events_conversation_id_event_id",
            "conversation_id",
            "event_id",
            unique=True,
            postgresql_where=text("event_id IS NOT NULL"),
        ),
    ),
    ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
    # Each index here costs every append a page write, so the log keeps only what a query of
    # the store needs. The feed reads in (txid, position) order: on SQLite txid is always 0 and
    # the unique position alone serves (and gives the next position); PostgreSQL draws
    # positions from a sequence and needs the pair.
    only_on("sqlite", UniqueConstraint("position")),
    only_on("postgresql", Index(None, "txid", "position")),
    # The request flag as of an old seq: the last request at or before it (the last
    # condensation comes from the condensations table).
    Index(
        "ix_events_requests",
        "conversation_id",
        "seq",
        postgresql_where=text("kind = 'CondensationRequest'"),
        sqlite_where=text("kind = 'CondensationRequest'"),
    ),
)

condensations = Table(
    "condensations",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", ID, nullable=False),
    Column("summary", Text, nullable=True),
    Column("summary_offset", BigInteger, nullable=True),
    # JSON array of the ids the condensation lists that were not in the view when it ran (so
    # did not leave it): ``[]`` nearly always. With the payload's list, what the view
    # ``condensation_forgotten`` shows. Every append writes it.
    Column("not_in_view", Text, nullable=True),
    PrimaryKeyConstraint("conversation_id", "seq"),
    ForeignKeyConstraint(["conversation_id", "seq"], ["events.conversation_id", "events.seq"]),
)

#: SQL views, for queries only: the migrations create them, and no table of the metadata above
#: is compared with them.
views = MetaData()

# One row per id a Condensation lists, and whether it was in the view when the condensation
# ran (and so really left it): a SQL view of the condensation's payload and ``not_in_view``
# (viewstore.store.database.forgotten).
condensation_forgotten = Table(
    "condensation_forgotten",
    views,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", ID, nullable=False),
    Column("was_in_view", Boolean, nullable=False),
)

view_entries = Table(
    "view_entries",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("order_key", ORDER_KEY, nullable=False),
    # A summary's id and kind. NULL on an event's row: a read takes them from the log row its
    # seq (and holder) name, as it does the payload (store/read/logged_ids.py).
    Column("event_id", ID, nullable=True),
    Column("seq", BigInteger, nullable=False),  # the event's seq; a summary: its condensation's
    Column("kind", String(255), nullable=True),
    Column("role", String(16), nullable=False),
    Column("tool_call_id", Text, nullable=True),
    Column("llm_response_id", Text, nullable=True),
    Column("thinking", Boolean, nullable=False),
    Column("entered_seq", BigInteger, nullable=False),
    Column("left_seq", BigInteger, nullable=True),
    # A summary's event, which the log does not hold: the JSON its condensation synthesized and
    # its fields. NULL on an event's row: a read takes those from the log, joined on its
    # primary key, so each payload is stored once (docs/schema.md).
    Column("payload", Text, nullable=True),
    Column("source", String(255), nullable=True),
    Column("timestamp", String(64), nullable=True),
    Column("parent_id", ID, nullable=True),
    Column("is_summary", Boolean, nullable=False),
    # NULL on every row: a read builds each Event from its payload, which holds every field
    # this column once repeated (docs/schema.md).
    Column("envelope", Text, nullable=True),
    # Where the event's row is, when not in this conversation's log: a fork's rows copied from
    # its source (their events are the source's, or an ancestor's); NULL otherwise.
    Column("holder", CONVERSATION_ID, nullable=True),
    PrimaryKeyConstraint("conversation_id", "order_key"),
    ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
    Index(
        "ix_view_entries_current",
        "conversation_id",
        "order_key",
        postgresql_where=text("left_seq IS NULL"),
        sqlite_where=text("left_seq IS NULL"),
    ),
    # What a resume computed from rows reads besides the live view and the primary key
    # (docs/schema.md); a row enters it when it leaves the view, never on an append.
    Index(
        "ix_view_entries_left_actions",
        "conversation_id",
        "llm_response_id",
        postgresql_where=text("left_seq IS NOT NULL AND role = 'action'"),
        sqlite_where=text("left_seq IS NOT NULL AND role = 'action'"),
    ),
)

manipulation_indices = Table(
    "manipulation_indices",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("position", Integer, nullable=False),
    Column("from_seq", BigInteger, nullable=False),
    Column("to_seq", BigInteger, nullable=True),
    PrimaryKeyConstraint("conversation_id", "position", "from_seq"),
    ForeignKeyConstraint(["conversation_id"], ["conversations.id"]),
    Index(
        "ix_manipulation_indices_current",
        "conversation_id",
        "position",
        postgresql_where=text("to_seq IS NULL"),
        sqlite_where=text("to_seq IS NULL"),
    ),
)

# The OpenHands SDK's base_state.json of a conversation (agent settings, stats, HEAD): not an
# event, rewritten after most events, so one row per conversation holds the newest copy.
# ``revision`` counts the writes; ``at_version`` is the conversation version the writer had
# seen, which tells a reader which events the snapshot has not caught up with. No foreign key:
# the SDK writes its first snapshot before the conversation's first event.
base_states = Table(
    "base_states",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("revision", BigInteger, nullable=False),
    Column("at_version", BigInteger, nullable=False),
    Column("payload", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("conversation_id"),
)

# What an agent server says about a conversation (``viewstore ingest`` / ``sync``, migration
# 0020): which server (a source name), title, status, agent and model, the server's times and
# tags. Overwritten by newer posts; not part of the audit trail. No foreign key: the info may
# arrive before the first event.
conversation_sources = Table(
    "conversation_sources",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("source", String(255), nullable=False),
    Column("title", Text, nullable=True),
    Column("execution_status", String(64), nullable=True),
    Column("agent_kind", String(255), nullable=True),
    Column("llm_model", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=True),
    Column("tags", Text, nullable=True),  # JSON object
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("conversation_id"),
)

# What a store-backed agent server keeps of a conversation
# (viewstore.store.adapters.runners): its ``meta.json`` and the lease of the one server that may
# run it (holder, generation, expiry). Rewritten by the servers; not part of the audit trail.
server_conversations = Table(
    "server_conversations",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("meta", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("runner", String(255), nullable=True),
    Column("generation", BigInteger, nullable=False),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    PrimaryKeyConstraint("conversation_id"),
    # The servers' listing, keyset-paged in either order with the id as tie-breaker.
    *(Index(None, column, "conversation_id") for column in ("created_at", "updated_at")),
)

# One row per erased conversation (``EventStore.erase``): what it was, when and why it went.
# Append-only like the log; its row is also what lets the log's guard delete that conversation's
# events, and only them (docs/schema.md).
tombstones = Table(
    "tombstones",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("events", BigInteger, nullable=False),
    Column("last_hash", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("erased_at", DateTime(timezone=True), nullable=False),
    Column("reason", Text, nullable=False),
    Column("erased_by", String(255), nullable=True),
    PrimaryKeyConstraint("conversation_id"),
)

# One row per redaction of an event (``EventStore.redact``): what was removed, when, why and by
# whom, and what ``verify`` needs to carry the hash chain across the changed payload. A second
# redaction of the same event is its next ``round``. Append-only (docs/schema.md).
redactions = Table(
    "redactions",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("round", Integer, nullable=False),
    Column("event_id", ID, nullable=False),
    Column("paths", Text, nullable=True),  # JSON array of JSON Pointers; NULL: all content
    Column("reason", Text, nullable=False),
    Column("redacted_at", DateTime(timezone=True), nullable=False),
    Column("redacted_by", String(255), nullable=True),
    Column("previous_hash", String(64), nullable=False),
    Column("event_hash", String(64), nullable=False),
    Column("removed_digest", String(64), nullable=False),  # SHA-256 of the payload before
    Column("redacted_digest", String(64), nullable=False),  # and after
    Column("record_hash", String(64), nullable=False),
    # JSON object: the leaf digest of each string the round replaced, by JSON Pointer
    # (docs/schema.md); NULL on a record of an event hashed before chain scheme 2.
    Column("leaf_digests", Text, nullable=True),
    # The retention policy that wrote the record (docs/retention.md): "redact after ..." a
    # redaction by age, any other a compaction; NULL: a user's redaction.
    Column("policy", Text, nullable=True),
    PrimaryKeyConstraint("conversation_id", "seq", "round"),
)

# One row per event that masking changed before it was stored (docs/masking.md): which strings,
# by which rule, how often; so an auditor can tell ``[masked:NAME]`` that masking wrote from
# text that only reads so. Written in the event's own append; append-only (docs/schema.md).
masks = Table(
    "masks",
    metadata,
    Column("conversation_id", CONVERSATION_ID, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", ID, nullable=False),
    Column("masked", Text, nullable=False),  # JSON array of {path, rule, count}
    Column("record_hash", String(64), nullable=False),
    PrimaryKeyConstraint("conversation_id", "seq"),
)
