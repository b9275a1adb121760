"""PostgreSQL roles (migration 0008): a writer that can do a worker's whole job and nothing that
would let it rewrite history, and a reader that reads one database's analyst views only.

Logins are made per test (``viewstore_test_login_<hex>``) and the databases' own roles are
named after the test databases, so parallel runs never share a role; all are dropped.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from viewstore import EventStore, MaskingRules, StorageError, append_with_retry
from viewstore.store.database.engine import normalize_url
from viewstore.store.database.roles import role_name, role_names

from ..ops._helpers import condensed_history, message

pytestmark = pytest.mark.postgres

REFUSED = "permission denied|must be owner|must be a member"


def _database(url: str) -> str:
    name = make_url(url).database
    assert name is not None
    return name


@contextmanager
def login_in(url: str, group: str) -> Iterator[str]:
    """A fresh login in ``group`` (trust authentication here), dropped afterwards; yields a URL
    of ``url``'s database for it."""
    login = "viewstore_test_login_" + secrets.token_hex(4)
    admin = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE ROLE "{login}" LOGIN IN ROLE "{group}"'))
        yield login
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP OWNED BY "{login}"'))
            conn.execute(text(f'DROP ROLE IF EXISTS "{login}"'))
        admin.dispose()


def as_login(url: str, login: str) -> str:
    parsed = normalize_url(make_url(url).set(username=login, password=None))
    return parsed.render_as_string(hide_password=False)


def _refused(engine: Engine, statement: str) -> None:
    with engine.connect() as conn, pytest.raises(Exception, match=REFUSED):
        conn.execute(text(statement))


def test_the_migration_creates_this_databases_roles(fresh_pg_url: str) -> None:
    with EventStore(fresh_pg_url) as store:
        store.create_schema()
        with store.engine.connect() as conn:
            found = {
                name
                for (name,) in conn.execute(
                    text("SELECT rolname FROM pg_roles WHERE rolname LIKE :p"),
                    {"p": f"viewstore_%_{_database(fresh_pg_url)}"},
                )
            }
    assert found == set(role_names(_database(fresh_pg_url)).values())


def test_role_names_fit_postgres_limit() -> None:
    assert role_name("reader", "viewstore") == "viewstore_reader_viewstore"
    long = "d" * 60
    assert len(role_name("writer", long)) <= 63
    assert role_name("writer", long) != role_name("writer", long[:-1] + "e")


def test_a_writer_appends_reads_and_rebuilds(fresh_pg_url: str) -> None:
    with EventStore(fresh_pg_url) as owner:
        owner.create_schema()
    writer_role = role_name("writer", _database(fresh_pg_url))
    with (
        login_in(fresh_pg_url, writer_role) as login,
        EventStore(as_login(fresh_pg_url, login)) as store,
    ):
        store.create_schema()  # at head already: only reads the revision
        store.append("c", condensed_history()[:4])
        store.append("c", condensed_history()[4:])  # a condensation: every table
        store.append("c", message("m4"))  # the fast path
        assert append_with_retry(store, "d", lambda view: [message("d1")]).version == 1
        assert store.view("c").event_ids == ["m1", "k1-summary", "m2", "m3", "m4"]
        # The feed may lag behind any transaction open on the server: a prefix, in order.
        fed = [(e.conversation_id, e.seq) for e in store.feed()]
        assert fed == [*(("c", seq) for seq in range(1, 9)), ("d", 1)][: len(fed)]
        assert store.refresh_catalogue_sizes() == 2  # the size orders' copies
        assert store.rebuild() == 2  # which recopies them
        assert [c.id for c in store.conversations(order_by="version")] == ["d", "c"]
        assert store.verify(against=store.checkpoint()).ok
    # Masking (docs/masking.md): the writer inserts its records, and may change none.
    rules = MaskingRules.from_toml('use = ["common"]')
    with (
        login_in(fresh_pg_url, writer_role) as login,
        EventStore(as_login(fresh_pg_url, login), masking=rules) as store,
    ):
        store.append("m", [message("s1", "key sk-proj-" + "w" * 30), message("s2")])
        assert [r.seq for r in store.masks("m")] == [1]
        for statement in ("UPDATE masks SET masked = '[]'", "DELETE FROM masks"):
            _refused(store.engine, statement)
        assert store.verify().ok


TAMPERING = [
    "ALTER TABLE events DISABLE TRIGGER USER",
    "ALTER TABLE events DISABLE TRIGGER events_append_only",
    "DROP TRIGGER events_append_only ON events",
    "CREATE OR REPLACE FUNCTION viewstore_events_append_only() RETURNS trigger "
    "LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$",
    "ALTER FUNCTION viewstore_events_append_only() RENAME TO gone",
    "ALTER TABLE events ADD COLUMN forged text",
    "UPDATE events SET payload = '{}'",
    "DELETE FROM events",
    "TRUNCATE events CASCADE",
    "DELETE FROM conversations",
    "UPDATE condensations SET summary = 'forged'",
    "DELETE FROM condensations",
    "UPDATE condensations SET not_in_view = '[]'",
    "CREATE TABLE intruder (x int)",
    "CREATE FUNCTION intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "DROP TABLE view_entries",
    "ALTER TABLE conversations OWNER TO CURRENT_USER",
]


def test_a_writer_cannot_alter_tables_disable_triggers_or_replace_functions(
    fresh_pg_url: str,
) -> None:
    with EventStore(fresh_pg_url) as owner:
        owner.create_schema()
        owner.append("c", condensed_history())
    with login_in(fresh_pg_url, role_name("writer", _database(fresh_pg_url))) as login:
        engine = create_engine(as_login(fresh_pg_url, login))
        try:
            for statement in TAMPERING:
                _refused(engine, statement)
        finally:
            engine.dispose()
    with EventStore(fresh_pg_url) as owner:
        assert owner.verify().ok
        assert len(owner.events("c")) == 7


def test_a_reader_reads_its_own_database_only(
    fresh_pg_url: str, pg_admin_engine: Engine, pg_server_url: str
) -> None:
    other = "viewstore_test_" + secrets.token_hex(6)
    with pg_admin_engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{other}"'))
    other_url = normalize_url(make_url(pg_server_url).set(database=other)).render_as_string(
        hide_password=False
    )
    try:
        for url, conversation in ((fresh_pg_url, "mine"), (other_url, "theirs")):
            with EventStore(url) as owner:
                owner.create_schema()
                owner.append(conversation, message("m1"))
        reader_role = role_name("reader", _database(fresh_pg_url))
        with login_in(fresh_pg_url, reader_role) as login:
            mine = create_engine(as_login(fresh_pg_url, login))
            theirs = create_engine(as_login(other_url, login))
            try:
                with mine.connect() as conn:
                    rows = conn.execute(text("SELECT conversation_id FROM attention_window"))
                    assert [r.conversation_id for r in rows] == ["mine"]
                with mine.connect() as conn:  # the viewer's tables too (migration 0009)
                    assert conn.execute(text("SELECT count(*) FROM events")).scalar() == 1
                _refused(mine, "INSERT INTO conversations (id) VALUES ('x')")
                for view in ("attention_window", "condensation_log", "view_history", "events"):
                    _refused(theirs, f"SELECT * FROM {view}")
            finally:
                mine.dispose()
                theirs.dispose()
        # The reader lists the size orders, which it may not refresh: merged, exact.
        with (
            login_in(fresh_pg_url, reader_role) as login,
            EventStore(as_login(fresh_pg_url, login)) as reading,
        ):
            listed = reading.conversations(order_by="view_length", descending=True)
            assert [c.id for c in listed] == ["mine"]
            _refused(reading.engine, "UPDATE catalogue_sizes SET version = 9")
        # The writer of one database cannot write to the other either.
        writer_role = role_name("writer", _database(fresh_pg_url))
        with (
            login_in(fresh_pg_url, writer_role) as login,
            EventStore(as_login(other_url, login)) as store,
            pytest.raises(StorageError, match="permission denied"),
        ):
            store.append("theirs", message("m2"))
    finally:
        with pg_admin_engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{other}" WITH (FORCE)'))
            for role in role_names(other).values():
                conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))


def test_only_the_owner_erases(fresh_pg_url: str) -> None:
    """The writer appends and keeps base states but cannot erase (no DELETE on the log, no
    INSERT of tombstones), nor can the reader; the owner can (migration 0010)."""
    with EventStore(fresh_pg_url) as owner:
        owner.create_schema()
        owner.append("c", condensed_history())
    database = _database(fresh_pg_url)
    for kind in ("writer", "reader"):
        with (
            login_in(fresh_pg_url, role_name(kind, database)) as login,
            EventStore(as_login(fresh_pg_url, login)) as store,
        ):
            if kind == "writer":
                store.save_base_state("c", "{}", at_version=store.version("c"))
            with pytest.raises(StorageError, match=REFUSED):
                store.erase("c", reason="not mine to erase")
            engine = create_engine(normalize_url(as_login(fresh_pg_url, login)))
            _refused(
                engine,
                "INSERT INTO tombstones VALUES ('c', 1, 'h', now(), now(), now(), 'r', NULL)",
            )
            _refused(engine, "DELETE FROM events WHERE conversation_id = 'c'")
            engine.dispose()
    with EventStore(fresh_pg_url) as owner:
        assert owner.version("c") == len(condensed_history())
        owner.erase("c", reason="the owner may")
        assert owner.conversation_ids() == []


def test_only_the_owner_redacts(fresh_pg_url: str) -> None:
    """The writer and the reader may read redaction records but not write one, so neither can
    redact or compact (nor change a payload under the log's guard); the owner can (migration
    0013)."""
    with EventStore(fresh_pg_url) as owner:
        owner.create_schema()
        owner.append("c", condensed_history())
        owner.redact("c", condensed_history()[0]["id"], reason="the owner may")
    database = _database(fresh_pg_url)
    for kind in ("writer", "reader"):
        with (
            login_in(fresh_pg_url, role_name(kind, database)) as login,
            EventStore(as_login(fresh_pg_url, login)) as store,
        ):
            assert len(store.redactions("c")) == 1
            with pytest.raises(StorageError, match=REFUSED):
                store.redact("c", condensed_history()[1]["id"], reason="not mine to redact")
            with pytest.raises(StorageError, match=REFUSED):  # compaction redacts: the same
                store.compact("c", older_than=timedelta(0), min_freed=-(10**6))
            engine = create_engine(normalize_url(as_login(fresh_pg_url, login)))
            _refused(engine, "UPDATE events SET payload = payload WHERE seq = 1")
            engine.dispose()
    with EventStore(fresh_pg_url) as owner:
        assert len(owner.redactions("c")) == 1 and owner.verify().ok
        assert owner.compact(older_than=timedelta(0), min_freed=-(10**6)).events == 2
        assert len(owner.redactions("c")) == 3 and owner.verify().ok
