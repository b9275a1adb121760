"""The baseline: viewstore's whole schema as release 0.1.0 ships it, in one revision.

Revision ID: 0027
Revises:
Create Date: 2026-11-28

Before the release the schema grew through revisions 0001 to 0027; no store outside this
repository was made by them, so they are folded into this one, which keeps the id of the last
(a store those revisions built is at this baseline already). What it makes, on both backends:
the tables and their indexes; the guards that keep the log, the tombstones and the redaction
records append-only and a conversation's identity set once; the analysts' SQL views. On
PostgreSQL also: the feed's position sequence and notification trigger, the server-side
append functions, the trigram index of the catalogue's search (where the server has
``pg_trgm``), and this database's reader and writer roles with their grants
(docs/operations.md, "Roles"). Later revisions start from here (docs/operations.md,
"Migrations").

Everything is frozen here, shapes and SQL alike: never import the live models into a revision.
``tests/migrations/test_baseline.py`` compares a store this revision builds with one the
folded revisions built.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = None
branch_labels = None
depends_on = None

log = logging.getLogger("viewstore.migrations")

ID = sa.String(512)
CONVERSATION_ID = sa.String(255)
HASH = sa.String(64)
AT = sa.DateTime(timezone=True)
# Order keys are digit strings compared byte by byte; PostgreSQL must not apply a locale.
ORDER_KEY = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")

TABLES = (
    "conversations",
    "events",
    "condensations",
    "view_entries",
    "manipulation_indices",
    "base_states",
    "conversation_sources",
    "server_conversations",
    "tombstones",
    "redactions",
    "masks",
    "catalogue_sizes",
)
VIEWS = ("condensation_forgotten", "condensation_log", "attention_window", "view_history")

APPEND_ONLY = "viewstore: the {} table is append-only"
SET_ONCE = (
    "viewstore: the id, created_at and fork links (forked_from, fork_seq, family_id) of a "
    "conversation are set once, when it is created"
)
SET_ONCE_COLUMNS = ("id", "created_at", "forked_from", "fork_seq", "family_id")
# Every column of a log row but its payload: what a redaction must leave as it was.
KEPT_BY_REDACTION = (
    "conversation_id",
    "seq",
    "event_id",
    "kind",
    "source",
    "timestamp",
    "parent_id",
    "hash",
    "recorded_at",
    "position",
    "txid",
)
TRIGRAM_INDEX = "ix_conversations_id_trgm"
LOG_IDS = "uq_events_conversation_id_event_id"  # SQLite's constraint
LOG_IDS_INDEX = "ix_events_conversation_id_event_id"  # PostgreSQL's partial unique index


def _fk(table: str, columns: list[str], target: str, targets: list[str]) -> sa.Constraint:
    name = f"fk_{table}_{'_'.join(columns)}_{target}"
    return sa.ForeignKeyConstraint(columns, [f"{target}.{c}" for c in targets], name=name)


def _index(name: str, table: str, columns: list[str], where: str | None = None) -> None:
    partial = None if where is None else sa.text(where)
    op.create_index(name, table, columns, postgresql_where=partial, sqlite_where=partial)


def _tables(dialect: str) -> None:
    op.create_table(
        "conversations",
        sa.Column("id", CONVERSATION_ID, nullable=False),
        sa.Column("created_at", AT, nullable=False),
        sa.Column("updated_at", AT, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("unhandled_request", sa.Boolean(), nullable=False),
        sa.Column("view_length", sa.Integer(), nullable=False),
        sa.Column("pending_tool_calls", sa.Text(), nullable=False),
        sa.Column("in_tool_loop", sa.Boolean(), nullable=False),
        sa.Column("last_is_action", sa.Boolean(), nullable=False),
        sa.Column("last_batch", sa.Text(), nullable=True),
        sa.Column("last_hash", HASH, nullable=False),
        sa.Column("forked_from", CONVERSATION_ID, nullable=True),
        sa.Column("fork_seq", sa.BigInteger(), nullable=True),
        sa.Column("family_id", CONVERSATION_ID, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_conversations"),
    )
    _index("ix_conversations_forked_from", "conversations", ["forked_from"])
    for column in ("created_at", "updated_at"):
        _index(f"ix_conversations_{column}_id", "conversations", [column, "id"])
    # The orders by size, out of the append's way (issue 41; docs/schema.md).
    op.create_table(
        "catalogue_sizes",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("updated_at", AT, nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("view_length", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_catalogue_sizes"),
        _fk("catalogue_sizes", ["conversation_id"], "conversations", ["id"]),
    )
    _index("ix_catalogue_sizes_updated_at", "catalogue_sizes", ["updated_at"])
    for column in ("version", "view_length"):
        _index(
            f"ix_catalogue_sizes_{column}_conversation_id",
            "catalogue_sizes",
            [column, "conversation_id"],
        )
    op.create_table(
        "events",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("kind", sa.String(255), nullable=False),
        sa.Column("source", sa.String(255), nullable=True),
        sa.Column("timestamp", sa.String(64), nullable=True),
        sa.Column("parent_id", ID, nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("hash", HASH, nullable=False),
        sa.Column("recorded_at", AT, nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "seq", name="pk_events"),
        *(
            [sa.UniqueConstraint("conversation_id", "event_id", name=LOG_IDS)]
            * (dialect == "sqlite")
        ),
        _fk("events", ["conversation_id"], "conversations", ["id"]),
        # SQLite's txid is always 0: the unique position alone orders the feed.
        *([sa.UniqueConstraint("position", name="uq_events_position")] * (dialect == "sqlite")),
    )
    _index(
        "ix_events_requests", "events", ["conversation_id", "seq"], "kind = 'CondensationRequest'"
    )
    if dialect == "postgresql":
        # Partial over every row (event_id is never NULL): the planner considers it only for a
        # statement that names an event id (viewstore/store/database/schema.py says why).
        op.create_index(
            LOG_IDS_INDEX,
            "events",
            ["conversation_id", "event_id"],
            unique=True,
            postgresql_where=sa.text("event_id IS NOT NULL"),
        )
        _index("ix_events_txid_position", "events", ["txid", "position"])
    op.create_table(
        "condensations",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("summary_offset", sa.BigInteger(), nullable=True),
        sa.Column("not_in_view", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "seq", name="pk_condensations"),
        _fk("condensations", ["conversation_id", "seq"], "events", ["conversation_id", "seq"]),
    )
    op.create_table(
        "view_entries",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("order_key", ORDER_KEY, nullable=False),
        sa.Column("event_id", ID, nullable=True),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(255), nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=True),
        sa.Column("llm_response_id", sa.Text(), nullable=True),
        sa.Column("thinking", sa.Boolean(), nullable=False),
        sa.Column("entered_seq", sa.BigInteger(), nullable=False),
        sa.Column("left_seq", sa.BigInteger(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=True),
        sa.Column("source", sa.String(255), nullable=True),
        sa.Column("timestamp", sa.String(64), nullable=True),
        sa.Column("parent_id", ID, nullable=True),
        sa.Column("is_summary", sa.Boolean(), nullable=False),
        sa.Column("envelope", sa.Text(), nullable=True),
        sa.Column("holder", CONVERSATION_ID, nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "order_key", name="pk_view_entries"),
        _fk("view_entries", ["conversation_id"], "conversations", ["id"]),
    )
    _index(
        "ix_view_entries_current",
        "view_entries",
        ["conversation_id", "order_key"],
        "left_seq IS NULL",
    )
    _index(
        "ix_view_entries_left_actions",
        "view_entries",
        ["conversation_id", "llm_response_id"],
        "left_seq IS NOT NULL AND role = 'action'",
    )
    op.create_table(
        "manipulation_indices",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("from_seq", sa.BigInteger(), nullable=False),
        sa.Column("to_seq", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint(
            "conversation_id", "position", "from_seq", name="pk_manipulation_indices"
        ),
        _fk("manipulation_indices", ["conversation_id"], "conversations", ["id"]),
    )
    _index(
        "ix_manipulation_indices_current",
        "manipulation_indices",
        ["conversation_id", "position"],
        "to_seq IS NULL",
    )
    op.create_table(
        "base_states",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("at_version", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("updated_at", AT, nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_base_states"),
    )
    op.create_table(
        "conversation_sources",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("execution_status", sa.String(64), nullable=True),
        sa.Column("agent_kind", sa.String(255), nullable=True),
        sa.Column("llm_model", sa.Text(), nullable=True),
        sa.Column("created_at", AT, nullable=True),
        sa.Column("updated_at", AT, nullable=True),
        sa.Column("tags", sa.Text(), nullable=True),
        sa.Column("recorded_at", AT, nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_conversation_sources"),
    )
    op.create_table(
        "server_conversations",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("meta", sa.Text(), nullable=True),
        sa.Column("created_at", AT, nullable=False),
        sa.Column("updated_at", AT, nullable=False),
        sa.Column("runner", sa.String(255), nullable=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("lease_expires_at", AT, nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_server_conversations"),
    )
    for column in ("created_at", "updated_at"):
        _index(
            f"ix_server_conversations_{column}_conversation_id",
            "server_conversations",
            [column, "conversation_id"],
        )
    op.create_table(
        "tombstones",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("last_hash", HASH, nullable=False),
        sa.Column("created_at", AT, nullable=False),
        sa.Column("updated_at", AT, nullable=False),
        sa.Column("erased_at", AT, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("erased_by", sa.String(255), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", name="pk_tombstones"),
    )
    op.create_table(
        "redactions",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("paths", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("redacted_at", AT, nullable=False),
        sa.Column("redacted_by", sa.String(255), nullable=True),
        sa.Column("previous_hash", HASH, nullable=False),
        sa.Column("event_hash", HASH, nullable=False),
        sa.Column("removed_digest", HASH, nullable=False),
        sa.Column("redacted_digest", HASH, nullable=False),
        sa.Column("record_hash", HASH, nullable=False),
        sa.Column("leaf_digests", sa.Text(), nullable=True),
        sa.Column("policy", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("conversation_id", "seq", "round", name="pk_redactions"),
    )
    # What masking changed in an event before it was stored (docs/masking.md).
    op.create_table(
        "masks",
        sa.Column("conversation_id", CONVERSATION_ID, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("masked", sa.Text(), nullable=False),
        sa.Column("record_hash", HASH, nullable=False),
        sa.PrimaryKeyConstraint("conversation_id", "seq", name="pk_masks"),
    )


# -- full-text search (docs/search.md) ------------------------------------------------------

# What is searched: the words of an event's string values (never its keys), as the backend's
# own full-text search splits them. viewstore/store/read/search.py queries with the same text.
SEARCH_INDEX = "ix_events_search"
# PostgreSQL: an expression index over the log, so every write of a payload (an append by any
# path, a redaction, an erasure) keeps it without a statement of its own. The payload as jsonb
# (the escape \u0000, which jsonb refuses, as U+FFFD): to_tsvector of a jsonb takes its
# string values only.
PG_SEARCH_DOCUMENT = (
    "to_tsvector('simple', CAST(CASE WHEN strpos(payload, E'\\\\u0000') = 0 "
    "THEN payload ELSE replace(replace(replace(payload, E'\\\\\\\\', chr(1)), "
    "E'\\\\u0000', E'\\\\ufffd'), chr(1), E'\\\\\\\\') END AS jsonb))"
)
# SQLite: an FTS5 table without content of its own, keyed by the log row's position (unique
# there), kept by triggers of the log; a row is deleted with the words it was added with,
# which the old payload gives again.
SQLITE_SEARCH_WORDS = (
    "(SELECT group_concat(value, ' ') FROM json_tree({row}.payload) WHERE type = 'text')"
)


def _sqlite_search() -> None:
    op.execute(
        "CREATE VIRTUAL TABLE events_search USING fts5("
        "body, content='', tokenize='unicode61 remove_diacritics 2')"
    )
    add = "INSERT INTO events_search(rowid, body) VALUES (new.position, {})".format(
        SQLITE_SEARCH_WORDS.format(row="new")
    )
    drop = (
        "INSERT INTO events_search(events_search, rowid, body) VALUES "
        "('delete', old.position, {})".format(SQLITE_SEARCH_WORDS.format(row="old"))
    )
    op.execute(f"CREATE TRIGGER events_search_insert AFTER INSERT ON events BEGIN {add}; END")
    op.execute(f"CREATE TRIGGER events_search_delete AFTER DELETE ON events BEGIN {drop}; END")
    op.execute(
        "CREATE TRIGGER events_search_update AFTER UPDATE OF payload ON events "
        f"BEGIN {drop}; {add}; END"
    )


# -- the analysts' views ----------------------------------------------------------------------

# A payload as JSON, the escape \u0000 shown as U+FFFD: PostgreSQL's JSON refuses it, and both
# backends show the same. (A PostgreSQL ``::`` cast would read as a bound parameter.)
_NUL_SAFE = {
    "postgresql": (
        "CAST(CASE WHEN strpos({c}, E'\\\\u0000') = 0 THEN {c} "
        "ELSE replace(replace(replace({c}, E'\\\\\\\\', chr(1)), "
        "E'\\\\u0000', E'\\\\ufffd'), chr(1), E'\\\\\\\\') END AS json)"
    ),
    "sqlite": (
        "CASE WHEN instr({c}, '\\u0000') = 0 THEN {c} "
        "ELSE replace(replace(replace({c}, '\\\\', char(1)), "
        "'\\u0000', '\\ufffd'), char(1), '\\\\') END"
    ),
}
# On PostgreSQL a condensation's log row is a lookup behind OFFSET 0, never merged into the
# query: as a join, a store never analyzed read the conversation's whole log for each
# condensation (docs/schema.md, "Plans that hold without statistics").
_FORGOTTEN = {
    "sqlite": """
        SELECT DISTINCT c.conversation_id AS conversation_id, c.seq AS seq,
               j.value AS event_id,
               NOT EXISTS (SELECT 1 FROM json_each(c.not_in_view) n WHERE n.value = j.value)
                   AS was_in_view
        FROM condensations c
        JOIN events e ON e.conversation_id = c.conversation_id AND e.seq = c.seq
        JOIN json_each(e.payload, '$.forgotten_event_ids') j
        WHERE j.type = 'text'
    """,
    "postgresql": """
        SELECT DISTINCT c.conversation_id AS conversation_id, c.seq AS seq,
               j.value AS event_id,
               NOT EXISTS (SELECT 1 FROM json_array_elements_text(CAST(c.not_in_view AS json))
                           AS n(value) WHERE n.value = j.value) AS was_in_view
        FROM condensations c
        CROSS JOIN LATERAL (SELECT l.payload FROM events l WHERE
            l.conversation_id = c.conversation_id AND l.seq = c.seq OFFSET 0) e
        CROSS JOIN LATERAL (SELECT {payload} -> 'forgotten_event_ids' AS ids) f
        CROSS JOIN LATERAL json_array_elements_text(
            CASE WHEN json_typeof(f.ids) = 'array' THEN f.ids END) AS j(value)
        WHERE TRUE
    """,
}
_CONDENSATION_LOG = """
    SELECT c.conversation_id,
           c.seq AS condensation_seq,
           c.event_id AS condensation_event_id,
           c.summary,
           c.summary_offset,
           f.event_id AS forgotten_event_id,
           f.was_in_view,
           fe.seq AS forgotten_seq,
           fe.kind AS forgotten_kind
    FROM condensations c
    LEFT JOIN condensation_forgotten f
           ON f.conversation_id = c.conversation_id AND f.seq = c.seq
    LEFT JOIN events fe
           ON fe.conversation_id = f.conversation_id AND fe.event_id = f.event_id
"""


def _shown(name: str) -> str:
    return f"CASE WHEN v.is_summary THEN v.{name} ELSE COALESCE(v.{name}, e.{name}) END"


# Each view row with its event: the log's row (a fork's copied row: its holder's), or for a
# summary the row itself, which holds its own id, kind and payload.
_VIEW_ROWS = f"""
    SELECT v.conversation_id, v.order_key, COALESCE(v.event_id, e.event_id) AS event_id,
           COALESCE(v.kind, e.kind) AS kind, v.seq, v.entered_seq, v.left_seq,
           {_shown("source")} AS source, {_shown("timestamp")} AS timestamp,
           COALESCE(v.payload, e.payload) AS payload
    FROM view_entries v
    LEFT JOIN events e
        ON e.conversation_id = COALESCE(v.holder, v.conversation_id) AND e.seq = v.seq
"""


def _views(dialect: str) -> None:
    nul_safe = _NUL_SAFE[dialect]
    forgotten = _FORGOTTEN[dialect].format(payload=nul_safe.format(c="e.payload"))
    op.execute(f"CREATE VIEW condensation_forgotten AS {forgotten}")
    op.execute(f"CREATE VIEW condensation_log AS {_CONDENSATION_LOG}")
    payload = nul_safe.format(c="payload")
    op.execute(
        f"""
        CREATE VIEW attention_window AS
        SELECT conversation_id,
               ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY order_key) - 1
                   AS position,
               event_id, kind, source, timestamp, {payload} AS payload, seq
        FROM ({_VIEW_ROWS} WHERE v.left_seq IS NULL) AS r
        """
    )
    op.execute(
        f"""
        CREATE VIEW view_history AS
        SELECT conversation_id, order_key, event_id, kind, seq, entered_seq, left_seq, source,
               timestamp, {payload} AS payload
        FROM ({_VIEW_ROWS}) AS r
        """
    )


# -- SQLite's guards --------------------------------------------------------------------------


def _sqlite_guards() -> None:
    # A trigger of the main schema resolves its tables in main whatever temp holds; a
    # qualified main. name would make the file unreadable when attached under another name.
    raise_ = "BEGIN SELECT RAISE(ABORT, '{}'); END"
    kept = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in KEPT_BY_REDACTION)
    erased = "EXISTS (SELECT 1 FROM tombstones WHERE conversation_id = OLD.conversation_id)"
    op.execute(
        "CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events "
        f"WHEN NOT ({kept} AND EXISTS (SELECT 1 FROM redactions "
        "WHERE conversation_id = NEW.conversation_id AND seq = NEW.seq)) "
        + raise_.format(APPEND_ONLY.format("events"))
    )
    op.execute(
        f"CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events WHEN NOT {erased} "
        + raise_.format(APPEND_ONLY.format("events"))
    )
    op.execute(
        "CREATE TRIGGER tombstones_append_only_update BEFORE UPDATE ON tombstones "
        + raise_.format(APPEND_ONLY.format("tombstones"))
    )
    op.execute(
        "CREATE TRIGGER tombstones_append_only_delete BEFORE DELETE ON tombstones "
        + raise_.format(APPEND_ONLY.format("tombstones"))
    )
    # Records of redactions and maskings go only with their conversation.
    for table in ("redactions", "masks"):
        op.execute(
            f"CREATE TRIGGER {table}_append_only_update BEFORE UPDATE ON {table} "
            + raise_.format(APPEND_ONLY.format(table))
        )
        op.execute(
            f"CREATE TRIGGER {table}_append_only_delete BEFORE DELETE ON {table} "
            f"WHEN NOT {erased} " + raise_.format(APPEND_ONLY.format(table))
        )
    changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in SET_ONCE_COLUMNS)
    op.execute(
        f"CREATE TRIGGER conversations_set_once BEFORE UPDATE ON conversations WHEN {changed} "
        + raise_.format(SET_ONCE)
    )


# -- PostgreSQL's functions and guards --------------------------------------------------------

# Every function names its tables in the store's schema ({s}, quoted) and pins its search_path
# to it, pg_temp last: a session's temporary table of the same name can never stand in.
_PIN = "LANGUAGE plpgsql SET search_path = {s}, pg_temp AS"
_REFUSE = "RAISE EXCEPTION '{}' USING ERRCODE = 'restrict_violation';"
_ERASED = "EXISTS (SELECT 1 FROM {s}.tombstones WHERE conversation_id = OLD.conversation_id)"
_EVENTS_GUARD = f"""
CREATE OR REPLACE FUNCTION {{s}}.viewstore_events_append_only() RETURNS trigger
{_PIN} $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF {_ERASED} THEN
            RETURN OLD;  -- erased (EventStore.erase): its tombstone is written first
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF {" AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in KEPT_BY_REDACTION)}
        AND EXISTS (
            SELECT 1 FROM {{s}}.redactions
            WHERE conversation_id = NEW.conversation_id AND seq = NEW.seq
            AND redacted_digest = encode(sha256(convert_to(NEW.payload, 'UTF8')), 'hex')
        ) THEN
            RETURN NEW;  -- redacted (EventStore.redact): its record is written first
        END IF;
    END IF;
    {_REFUSE.format(APPEND_ONLY.format("events"))}
END $$
"""
_TOMBSTONES_GUARD = f"""
CREATE OR REPLACE FUNCTION {{s}}.viewstore_tombstones_append_only() RETURNS trigger
{_PIN} $$
BEGIN
    {_REFUSE.format(APPEND_ONLY.format("tombstones"))}
END $$
"""
# The records of a conversation's redactions and maskings go only with the conversation.
_ERASABLE_GUARD = f"""
CREATE OR REPLACE FUNCTION {{{{s}}}}.viewstore_{{table}}_append_only() RETURNS trigger
{_PIN.replace("{", "{{").replace("}", "}}")} $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF {_ERASED.replace("{", "{{").replace("}", "}}")} THEN
            RETURN OLD;
        END IF;
    END IF;
    {_REFUSE.format("viewstore: the {table} table is append-only")}
END $$
"""
_REDACTIONS_GUARD = _ERASABLE_GUARD.format(table="redactions")
_MASKS_GUARD = _ERASABLE_GUARD.format(table="masks")
_SET_ONCE_GUARD = f"""
CREATE FUNCTION {{s}}.viewstore_conversations_set_once() RETURNS trigger
{_PIN} $$
BEGIN
    {_REFUSE.format(SET_ONCE)}
END $$
"""
# One commit's notification to the feed's followers (viewstore/store/feed/follow.py names the
# same channel): the schema's name, or its MD5 where a channel could not hold it.
_FEED_NOTIFY = f"""
CREATE OR REPLACE FUNCTION {{s}}.viewstore_feed_notify() RETURNS trigger
{_PIN} $$
BEGIN
    PERFORM pg_notify('viewstore_feed_' || CASE WHEN octet_length(TG_TABLE_SCHEMA) <= 48
                      THEN TG_TABLE_SCHEMA ELSE md5(TG_TABLE_SCHEMA) END,
                      pg_current_xact_id()::text);
    RETURN NULL;
END $$
"""
# The conversation row's compare-and-set, shared by both append functions.
_SWAP = """
    UPDATE {s}.conversations SET
        version = p_version, unhandled_request = p_unhandled, view_length = p_view_length,
        pending_tool_calls = p_pending, in_tool_loop = p_in_tool_loop,
        last_is_action = p_last_is_action, last_batch = p_last_batch,
        last_hash = p_last_hash, updated_at = p_updated_at
    WHERE id = p_key AND version = p_old_version AND last_hash = p_old_hash;
    IF NOT FOUND THEN
        RETURN false;
    END IF;"""
_STATE = """
    p_key text, p_old_version bigint, p_old_hash text,
    p_version bigint, p_unhandled boolean, p_view_length integer, p_pending text,
    p_in_tool_loop boolean, p_last_is_action boolean, p_last_batch text, p_last_hash text,
    p_updated_at timestamptz"""
_VIEW_COLUMNS = """conversation_id, order_key, event_id, seq, kind, role,
                              tool_call_id, llm_response_id, thinking, entered_seq,
                              left_seq, payload, source, timestamp, parent_id,
                              is_summary, envelope"""
# The append as arrays, one per column (an older client's); viewstore_append_rows below takes
# the same rows as one JSON document.
_APPEND = f"""
CREATE OR REPLACE FUNCTION {{s}}.viewstore_append({_STATE},
    e_seq bigint[], e_event_id text[], e_kind text[], e_source text[], e_timestamp text[],
    e_parent_id text[], e_payload text[], e_hash text[], e_recorded_at timestamptz[],
    v_order_key text[], v_event_id text[], v_seq bigint[], v_kind text[], v_role text[],
    v_tool_call_id text[], v_llm_response_id text[], v_thinking boolean[],
    v_entered_seq bigint[], v_left_seq bigint[], v_payload text[], v_source text[],
    v_timestamp text[], v_parent_id text[], v_is_summary boolean[], v_envelope text[],
    i_position integer[], i_from_seq bigint[], i_to_seq bigint[],
    c_position integer[], c_to_seq bigint[]
) RETURNS boolean
{_PIN} $$
BEGIN{_SWAP}
    INSERT INTO {{s}}.events (conversation_id, seq, event_id, kind, source, timestamp, parent_id,
                        payload, hash, recorded_at)
    SELECT p_key, x.* FROM unnest(e_seq, e_event_id, e_kind, e_source, e_timestamp,
                                  e_parent_id, e_payload, e_hash, e_recorded_at) AS x;
    IF cardinality(v_order_key) > 0 THEN
        INSERT INTO {{s}}.view_entries ({_VIEW_COLUMNS})
        SELECT p_key, x.* FROM unnest(v_order_key, v_event_id, v_seq, v_kind, v_role,
                                      v_tool_call_id, v_llm_response_id, v_thinking,
                                      v_entered_seq, v_left_seq, v_payload, v_source,
                                      v_timestamp, v_parent_id, v_is_summary, v_envelope) AS x;
    END IF;
    IF cardinality(i_position) > 0 THEN
        INSERT INTO {{s}}.manipulation_indices (conversation_id, position, from_seq, to_seq)
        SELECT p_key, x.* FROM unnest(i_position, i_from_seq, i_to_seq) AS x;
    END IF;
    FOR i IN 1 .. coalesce(cardinality(c_position), 0) LOOP
        UPDATE {{s}}.manipulation_indices SET to_seq = c_to_seq[i]
        WHERE conversation_id = p_key AND position = c_position[i] AND to_seq IS NULL;
    END LOOP;
    RETURN true;
END $$
"""
_APPEND_ROWS = f"""
CREATE OR REPLACE FUNCTION {{s}}.viewstore_append_rows({_STATE}, p_rows jsonb
) RETURNS boolean
{_PIN} $$
DECLARE
    closed record;
BEGIN{_SWAP}
    INSERT INTO {{s}}.events (conversation_id, seq, event_id, kind, source, timestamp, parent_id,
                        payload, hash, recorded_at)
    SELECT p_key, x.seq, x.event_id, x.kind, x.source, x.timestamp, x.parent_id, x.payload,
           x.hash, p_updated_at
    FROM jsonb_to_recordset(p_rows -> 'e') AS x(
        seq bigint, event_id text, kind text, source text, timestamp text, parent_id text,
        payload text, hash text);
    INSERT INTO {{s}}.view_entries ({_VIEW_COLUMNS})
    SELECT p_key, x.order_key, x.event_id, x.seq, x.kind, x.role, x.tool_call_id,
           x.llm_response_id, x.thinking, x.entered_seq, x.left_seq, x.payload, x.source,
           x.timestamp, x.parent_id, x.is_summary, x.envelope
    FROM jsonb_to_recordset(p_rows -> 'v') AS x(
        order_key text, event_id text, seq bigint, kind text, role text, tool_call_id text,
        llm_response_id text, thinking boolean, entered_seq bigint, left_seq bigint,
        payload text, source text, timestamp text, parent_id text, is_summary boolean,
        envelope text);
    INSERT INTO {{s}}.manipulation_indices (conversation_id, position, from_seq, to_seq)
    SELECT p_key, x.position, x.from_seq, x.to_seq
    FROM jsonb_to_recordset(p_rows -> 'i') AS x(position integer, from_seq bigint,
                                                 to_seq bigint);
    FOR closed IN SELECT * FROM jsonb_to_recordset(p_rows -> 'c')
                               AS x(position integer, to_seq bigint) LOOP
        UPDATE {{s}}.manipulation_indices SET to_seq = closed.to_seq
        WHERE conversation_id = p_key AND position = closed.position AND to_seq IS NULL;
    END LOOP;
    RETURN true;
END $$
"""
_TRIGGERS = (
    "events_append_only BEFORE UPDATE OR DELETE ON {s}.events FOR EACH ROW "
    "EXECUTE FUNCTION {s}.viewstore_events_append_only()",
    "events_no_truncate BEFORE TRUNCATE ON {s}.events FOR EACH STATEMENT "
    "EXECUTE FUNCTION {s}.viewstore_events_append_only()",
    "tombstones_append_only BEFORE UPDATE OR DELETE ON {s}.tombstones FOR EACH ROW "
    "EXECUTE FUNCTION {s}.viewstore_tombstones_append_only()",
    "tombstones_no_truncate BEFORE TRUNCATE ON {s}.tombstones FOR EACH STATEMENT "
    "EXECUTE FUNCTION {s}.viewstore_tombstones_append_only()",
    "redactions_append_only BEFORE UPDATE OR DELETE ON {s}.redactions FOR EACH ROW "
    "EXECUTE FUNCTION {s}.viewstore_redactions_append_only()",
    "redactions_no_truncate BEFORE TRUNCATE ON {s}.redactions FOR EACH STATEMENT "
    "EXECUTE FUNCTION {s}.viewstore_redactions_append_only()",
    "masks_append_only BEFORE UPDATE OR DELETE ON {s}.masks FOR EACH ROW "
    "EXECUTE FUNCTION {s}.viewstore_masks_append_only()",
    "masks_no_truncate BEFORE TRUNCATE ON {s}.masks FOR EACH STATEMENT "
    "EXECUTE FUNCTION {s}.viewstore_masks_append_only()",
    # The condition lives on the trigger, not in the function: every append updates the row,
    # and a WHEN that holds false costs no function call.
    "conversations_set_once BEFORE UPDATE ON {s}.conversations FOR EACH ROW WHEN ("
    + " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in SET_ONCE_COLUMNS)
    + ") EXECUTE FUNCTION {s}.viewstore_conversations_set_once()",
    "events_feed_notify AFTER INSERT ON {s}.events FOR EACH STATEMENT "
    "EXECUTE FUNCTION {s}.viewstore_feed_notify()",
)
_FUNCTIONS = (
    _EVENTS_GUARD,
    _TOMBSTONES_GUARD,
    _REDACTIONS_GUARD,
    _MASKS_GUARD,
    _SET_ONCE_GUARD,
    _FEED_NOTIFY,
    _APPEND,
    _APPEND_ROWS,
)


def _postgresql(schema: str) -> None:
    # The feed's columns, filled by the database at insert: a global position from a sequence
    # and the writing transaction's id (viewstore/store/append/rows.py).
    op.execute("CREATE SEQUENCE IF NOT EXISTS events_position_seq")
    op.execute(
        "ALTER TABLE events "
        "ALTER COLUMN position SET DEFAULT nextval('events_position_seq'), "
        "ALTER COLUMN txid SET DEFAULT (pg_current_xact_id()::text::bigint)"
    )
    # The log's payload compressed in its row (lz4 where the server has it): docs/schema.md.
    lz4 = (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
            )
        )
        .scalar()
    )
    op.execute(
        f"ALTER TABLE events ALTER COLUMN payload SET COMPRESSION {'lz4' if lz4 else 'pglz'}"
    )
    op.execute("ALTER TABLE events ALTER COLUMN payload SET STORAGE MAIN")
    for function in _FUNCTIONS:
        op.execute(function.replace("{s}", schema))
    for trigger in _TRIGGERS:
        op.execute("CREATE TRIGGER " + trigger.replace("{s}", schema))
    _trigram_index()
    op.execute(f"CREATE INDEX {SEARCH_INDEX} ON events USING gin ({PG_SEARCH_DOCUMENT})")
    _roles()


def _trigram_index() -> None:
    """The catalogue's search by id serves ``LIKE`` from a GIN index of the ids' trigrams,
    where the server has ``pg_trgm`` (created in the store's schema if it can be; its
    operator class is named with the schema that holds it). Otherwise search reads every id."""
    bind = op.get_bind()
    holder = sa.text(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_trgm'"
    )
    schema = bind.execute(holder).scalar()
    if schema is None:
        available = bind.execute(
            sa.text("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm')")
        ).scalar()
        if not available:
            log.warning("pg_trgm is not available on this server: catalogue search reads every id")
            return
        try:
            with bind.begin_nested():
                bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
        except sa.exc.DBAPIError as error:
            log.warning(
                "pg_trgm could not be created (%s): catalogue search reads every id "
                "(docs/operations.md says how to add its index later)",
                str(error.orig).strip().splitlines()[0],
            )
            return
        schema = bind.execute(holder).scalar()
    op.execute(
        f'CREATE INDEX {TRIGRAM_INDEX} ON conversations USING gin (id "{schema}".gin_trgm_ops)'
    )


# What the writer may do, table by table: the log, the condensations and the redaction records
# are only inserted (redact and erase run as the owner); the conversation row is updated by
# every append (and locked FOR UPDATE, which needs UPDATE); view and index rows are updated by
# appends and deleted by rebuild; a store-backed agent server rewrites its own rows.
_WRITER = {
    "conversations": "SELECT, INSERT, UPDATE",
    "events": "SELECT, INSERT",
    "condensations": "SELECT, INSERT",
    "view_entries": "SELECT, INSERT, UPDATE, DELETE",
    "manipulation_indices": "SELECT, INSERT, UPDATE, DELETE",
    "base_states": "SELECT, INSERT, UPDATE",
    "conversation_sources": "SELECT, INSERT, UPDATE",
    "server_conversations": "SELECT, INSERT, UPDATE, DELETE",
    "catalogue_sizes": "SELECT, INSERT, UPDATE",
    "masks": "SELECT, INSERT",
    "tombstones, redactions, viewstore_alembic_version": "SELECT",
    ", ".join(VIEWS): "SELECT",
}
# The reader selects the analysts' views and the tables the web viewer reads, nothing else.
_READER = ", ".join((*VIEWS, *(t for t in TABLES if t != "base_states")))


def _roles() -> None:
    """This database's ``viewstore_reader_<database>`` and ``viewstore_writer_<database>``
    (the MD5 of a name too long for PostgreSQL; viewstore/store/database/roles.py computes the
    same), NOLOGIN, created unless they exist, then granted. Without the right to create roles
    the grants are skipped and a notice says so."""
    grants = "\n".join(
        f"EXECUTE format('GRANT {privileges} ON {tables} TO %I', writer);"
        for tables, privileges in _WRITER.items()
    )
    create = """
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {role}) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', {role});
            EXCEPTION
                WHEN duplicate_object OR unique_violation THEN NULL;  -- a concurrent migration
            END;
        END IF;"""
    op.execute(
        f"""
        DO $$
        DECLARE
            db text := current_database();
            reader text := 'viewstore_reader_' || db;
            writer text := 'viewstore_writer_' || db;
            s text := current_schema();
        BEGIN
            IF octet_length(reader) > 63 THEN
                reader := 'viewstore_reader_' || md5(db);
                writer := 'viewstore_writer_' || md5(db);
            END IF;
            BEGIN
                {create.format(role="reader")}
                {create.format(role="writer")}
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE NOTICE 'viewstore: no privilege to create roles % and %; a superuser '
                    'can create them and run the grants of docs/operations.md', reader, writer;
                RETURN;
            END;
            EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', db, reader, writer);
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I, %I', s, reader, writer);
            EXECUTE format('GRANT SELECT ON {_READER} TO %I', reader);
            {grants}
            EXECUTE format('GRANT USAGE ON SEQUENCE events_position_seq TO %I', writer);
        END $$
        """
    )


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    _tables(dialect)
    _views(dialect)
    if dialect == "postgresql":
        schema = bind.execute(sa.text("SELECT quote_ident(current_schema())")).scalar_one()
        _postgresql(str(schema))
    else:
        _sqlite_guards()
        _sqlite_search()


def downgrade() -> None:
    # Roles, and an extension another application may use, are kept.
    for view in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {view}")
    op.execute("DROP TABLE IF EXISTS events_search")  # SQLite's search
    for table in reversed(TABLES):
        op.drop_table(table)  # with its indexes and triggers
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP SEQUENCE IF EXISTS events_position_seq")
        for function in (
            "events_append_only()",
            "tombstones_append_only()",
            "redactions_append_only()",
            "masks_append_only()",
            "conversations_set_once()",
            "feed_notify()",
            "append_rows(text, bigint, text, bigint, boolean, integer, text, boolean, boolean, "
            "text, text, timestamptz, jsonb)",
        ):
            op.execute(f"DROP FUNCTION IF EXISTS viewstore_{function}")
        op.execute(
            "DROP FUNCTION IF EXISTS viewstore_append(text, bigint, text, bigint, boolean, "
            "integer, text, boolean, boolean, text, text, timestamptz, bigint[], text[], "
            "text[], text[], text[], text[], text[], text[], timestamptz[], text[], text[], "
            "bigint[], text[], text[], text[], text[], boolean[], bigint[], bigint[], text[], "
            "text[], text[], text[], boolean[], text[], integer[], bigint[], bigint[], "
            "integer[], bigint[])"
        )
