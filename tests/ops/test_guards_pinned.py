"""Migration 0015: fork links cannot be rewritten, verify names the ones written wrong, and no
temporary table opens a guard (issue 26, items 3 and 5).

A fork's links decide whose events it reads and whose erasure it blocks (``erase`` refuses a
conversation with forks). The writer role updates the conversation row on every append, so
the database itself must refuse a change of the links; what it cannot refuse (a row INSERTed
wrong, an owner with the trigger off) ``verify`` must name. On PostgreSQL every viewstore
function names its tables in the store's schema and pins its ``search_path``, ``pg_temp``
last, so a session's temporary ``tombstones`` or ``redactions`` is never the one a guard
reads; on SQLite a trigger of the main schema reads the main schema's tables whatever
``temp`` holds.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from viewstore import ConversationHasForksError, EventStore
from viewstore.store.database.roles import role_name

from ..store.test_roles import as_login, login_in
from ._helpers import condensed_history, is_postgres, message

#: Also on hash-partitioned tables (tests/conftest.py): the guard must reach every partition.
PARTITIONED_TOO = True

LINKS_REFUSED = "fork links .* of a conversation are set once"
APPEND_ONLY = "append-only"
PERMISSION = "permission denied"


def _database(url: str) -> str:
    name = make_url(url).database
    assert name is not None
    return name


@contextmanager
def writer_engine(url: str) -> Iterator[Engine]:
    """An engine logged in as a member of the database's writer role (migration 0008)."""
    with login_in(url, role_name("writer", _database(url))) as login:
        engine = create_engine(as_login(url, login))
        try:
            yield engine
        finally:
            engine.dispose()


@contextmanager
def links_unguarded(conn: Connection) -> Iterator[None]:
    """The owner switches the fork-links guard off (PostgreSQL: disables the trigger; SQLite:
    drops it and recreates it from its stored SQL); a store without it (before migration
    0015) has nothing to switch off."""
    if conn.dialect.name == "postgresql":
        guarded = conn.execute(
            text("SELECT 1 FROM pg_trigger WHERE tgname = 'conversations_set_once'")
        ).first()
        if guarded is not None:
            conn.execute(text("ALTER TABLE conversations DISABLE TRIGGER conversations_set_once"))
        yield
        if guarded is not None:
            conn.execute(text("ALTER TABLE conversations ENABLE TRIGGER conversations_set_once"))
        return
    stored = conn.execute(
        text("SELECT sql FROM sqlite_master WHERE name = 'conversations_set_once'")
    ).scalar()
    if stored is not None:
        conn.execute(text("DROP TRIGGER conversations_set_once"))
    yield
    if stored is not None:
        conn.execute(text(stored))


def _victim_and_lookalike(store: EventStore) -> None:
    """``victim``; ``twin``, an identical copy of it; ``a``, which starts with the victim's
    first three events and goes on its own; ``f``, a real fork of ``twin`` at seq 4."""
    store.create_schema()
    store.append("victim", condensed_history())
    store.append("twin", condensed_history())
    store.append("a", [*condensed_history()[:3], message("a4")])
    store.fork("twin", 4, "f")
    store.append("f", message("f5"))
    assert store.verify().ok


FORGERIES = [
    # A conversation marked as a fork of the victim: its own copies of the first events stay.
    (
        "marked-as-fork",
        "UPDATE conversations SET forked_from = 'victim', fork_seq = 3, family_id = 'victim' "
        "WHERE id = 'a'",
        "a: events: 3 event(s) stored under this conversation at or below its fork_seq 3",
    ),
    (
        "fork-seq-past-the-source",
        "UPDATE conversations SET fork_seq = 99 WHERE id = 'f'",
        "f: conversations.fork_seq is 99, not a seq of its source 'twin''s own events (1 to 7)",
    ),
    (
        "fork-seq-zero",
        "UPDATE conversations SET fork_seq = 0 WHERE id = 'f'",
        "f: conversations.fork_seq is 0, not a seq of its source 'twin''s own events",
    ),
    (
        "family",
        "UPDATE conversations SET family_id = 'victim' WHERE id = 'f'",
        "f: conversations.family_id is 'victim', but its source 'twin' is of family 'twin'",
    ),
    (
        "family-on-a-non-fork",
        "UPDATE conversations SET family_id = 'victim' WHERE id = 'a'",
        "a: conversations.family_id is 'victim' but forked_from is NULL",
    ),
    (
        "source-missing",
        "UPDATE conversations SET forked_from = 'nobody' WHERE id = 'f'",
        "f: conversations.forked_from: its source 'nobody' does not exist",
    ),
    (
        "cycle",
        "UPDATE conversations SET forked_from = 'f' WHERE id = 'f'",
        "f: conversations.forked_from: the fork links loop ('f' -> 'f')",
    ),
    (
        "inserted-row",  # no guard sees an INSERT: the row must explain itself to verify
        "INSERT INTO conversations SELECT 'g', created_at, updated_at, version, "
        "unhandled_request, view_length, pending_tool_calls, in_tool_loop, last_is_action, "
        "last_batch, last_hash, 'victim', 8, 'victim' FROM conversations WHERE id = 'victim'",
        "g: conversations.fork_seq is 8, not a seq of its source 'victim''s own events (1 to 7)",
    ),
]


@pytest.mark.parametrize(
    ("sql", "problem"), [c[1:] for c in FORGERIES], ids=[c[0] for c in FORGERIES]
)
def test_verify_names_a_forged_fork_link(db_url: str, sql: str, problem: str) -> None:
    with EventStore(db_url) as store:
        _victim_and_lookalike(store)
        engine = create_engine(db_url)
        try:
            with engine.begin() as conn, links_unguarded(conn):
                conn.execute(text(sql))
        finally:
            engine.dispose()
        report = store.verify()
        assert not report.ok
        assert any(p.startswith(problem) for p in report.problems), report.render()
        for untouched in ("victim", "twin"):
            assert store.verify(untouched).ok


LINK_UPDATES = [
    "UPDATE conversations SET forked_from = 'victim', fork_seq = 3, family_id = 'victim' "
    "WHERE id = 'a'",
    "UPDATE conversations SET forked_from = 'victim', family_id = 'victim' WHERE id = 'f'",
    "UPDATE conversations SET fork_seq = 3 WHERE id = 'f'",
    "UPDATE conversations SET family_id = NULL WHERE id = 'f'",
    "UPDATE conversations SET forked_from = NULL, fork_seq = NULL, family_id = NULL WHERE id = 'f'",
    "UPDATE conversations SET id = 'renamed' WHERE id = 'f'",
    "UPDATE conversations SET created_at = '2020-01-01 00:00:00' WHERE id = 'a'",
]


def test_the_owner_cannot_change_fork_links_with_the_guard_on(db_url: str) -> None:
    with EventStore(db_url) as store:
        _victim_and_lookalike(store)
        engine = create_engine(db_url)
        try:
            for sql in LINK_UPDATES:
                with pytest.raises(DBAPIError, match=LINKS_REFUSED), engine.begin() as conn:
                    conn.execute(text(sql))
        finally:
            engine.dispose()
        # What the store itself writes to the row still goes through.
        store.append("f", message("f6"))
        store.append("victim", message("m4"))
        assert store.rebuild() == 4
        assert store.verify().ok
        assert store.forks("victim") == []
        store.erase("f", reason="test")
        assert store.erase("victim", reason="test").events == 8


@pytest.mark.postgres
def test_a_writer_cannot_make_a_conversation_a_fork_of_another(fresh_pg_url: str) -> None:
    """The attack of issue 26 item 3: the writer re-points ``a`` (same first events) or the
    twin's fork ``f`` to the victim, which would block the victim's erasure unseen."""
    with EventStore(fresh_pg_url) as store:
        _victim_and_lookalike(store)
        with writer_engine(fresh_pg_url) as engine:
            for sql in LINK_UPDATES:
                with pytest.raises(DBAPIError, match=LINKS_REFUSED), engine.begin() as conn:
                    conn.execute(text(sql))
            with EventStore(engine.url.render_as_string(hide_password=False)) as writer:
                writer.append("f", message("f6"))  # the writer's own updates still work
                assert writer.rebuild() == 4
        assert store.verify().ok
        assert store.erase("victim", reason="test").events == 7
        with pytest.raises(ConversationHasForksError):
            store.erase("twin", reason="test")


def _payload_digest(conn: Connection) -> tuple[str, str]:
    payload = conn.execute(
        text("SELECT payload FROM events WHERE conversation_id = 'c' AND seq = 1")
    ).scalar_one()
    forged = payload.replace("text 1", "forged")
    return forged, hashlib.sha256(forged.encode()).hexdigest()


def _shadow_guard_tables(conn: Connection) -> str:
    """Temporary ``tombstones`` and ``redactions`` that claim ``c`` was erased and its first
    event redacted to a forged payload; returns that payload."""
    forged, digest = _payload_digest(conn)
    conn.execute(text("CREATE TEMP TABLE tombstones (conversation_id text)"))
    conn.execute(text("INSERT INTO tombstones VALUES ('c')"))
    conn.execute(
        text(
            "CREATE TEMP TABLE redactions (conversation_id text, seq bigint, redacted_digest text)"
        )
    )
    conn.execute(text("INSERT INTO redactions VALUES ('c', 1, :d)"), {"d": digest})
    return forged


def _drop_shadows(conn: Connection) -> None:
    temp = "pg_temp" if conn.dialect.name == "postgresql" else "temp"
    conn.execute(text(f"DROP TABLE {temp}.tombstones"))
    conn.execute(text(f"DROP TABLE {temp}.redactions"))
    conn.commit()


def _tamper_through_shadows(engine: Engine, refusal: str) -> None:
    with engine.connect() as conn:
        forged = _shadow_guard_tables(conn)
        conn.commit()
        for statement in (
            "DELETE FROM events WHERE conversation_id = 'c' AND seq = 7",
            "UPDATE events SET payload = :forged WHERE conversation_id = 'c' AND seq = 1",
        ):
            with pytest.raises(DBAPIError, match=refusal):
                conn.execute(text(statement), {"forged": forged})
            conn.rollback()
        _drop_shadows(conn)


def test_a_temporary_table_does_not_open_the_logs_guard(db_url: str) -> None:
    """Before migration 0015 the PostgreSQL guard read ``tombstones`` and ``redactions`` by the
    caller's search_path, where the session's temporary tables come first."""
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", condensed_history())
        engine = create_engine(db_url)
        try:
            _tamper_through_shadows(engine, APPEND_ONLY)
        finally:
            engine.dispose()
        if is_postgres(db_url):
            with writer_engine(db_url) as writer:
                _tamper_through_shadows(writer, PERMISSION)
        assert len(store.events("c")) == 7
        assert store.verify().ok


def test_a_temporary_tombstone_does_not_open_the_redactions_guard(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", condensed_history())
        store.redact("c", "m1", reason="test")
        engine = create_engine(db_url)
        try:
            with engine.connect() as conn:
                _shadow_guard_tables(conn)
                conn.commit()
                with pytest.raises(DBAPIError, match="redactions table is append-only"):
                    real = "public" if is_postgres(db_url) else "main"
                    conn.execute(text(f"DELETE FROM {real}.redactions WHERE conversation_id = 'c'"))
                conn.rollback()
                _drop_shadows(conn)
        finally:
            engine.dispose()
        assert len(store.redactions("c")) == 1


#: A table named where a statement reads or writes one: every such name must be qualified.
_TABLE_NAMED = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+([\w.\"]+)(\s*\()?", re.IGNORECASE)
_FUNCTIONS = """
SELECT p.proname, p.proconfig, p.prosrc FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'viewstore%'
ORDER BY 1
"""


def _functions(store: EventStore) -> dict[str, tuple[list[str] | None, str]]:
    with store.engine.connect() as conn:
        return {name: (config, source) for name, config, source in conn.execute(text(_FUNCTIONS))}


def _assert_pinned(store: EventStore, schema: str) -> None:
    found = _functions(store)
    assert set(found) >= {
        "viewstore_append",
        "viewstore_append_rows",
        "viewstore_conversations_set_once",
        "viewstore_events_append_only",
        "viewstore_redactions_append_only",
        "viewstore_tombstones_append_only",
    }
    for name, (config, source) in found.items():
        assert config == [f"search_path={schema}, pg_temp"], name
        # A name followed by "(" is a function (unnest, jsonb_to_recordset), and ``IS DISTINCT
        # FROM OLD.x`` compares columns: neither names a table.
        tables = [
            name
            for name, call in _TABLE_NAMED.findall(source)
            if not call and not name.upper().startswith(("OLD.", "NEW."))
        ]
        unqualified = [t for t in tables if not t.startswith(f"{schema}.")]
        assert unqualified == [], (name, unqualified)


@pytest.mark.postgres
@pytest.mark.parametrize("schema", [None, "vs_pinned"])
def test_every_viewstore_function_pins_its_search_path(
    fresh_pg_url: str, schema: str | None
) -> None:
    with EventStore(fresh_pg_url, schema=schema) as store:
        store.create_schema()
        _assert_pinned(store, schema or "public")
        store.append("c", condensed_history())
        store.append("c", message("m4"))  # the server function, pinned
        assert store.verify().ok
