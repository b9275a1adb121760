"""Every column of every table, forged as the writer role and as the owner, no guard switched
off: the database refuses it, or ``verify`` names the conversation whose row it was.

The columns are read from ``viewstore.store.database.schema.metadata``, so a new column is tried the
day it is added. The store holds what makes columns matter: a condensation, a fork taken
inside the history and a fork of that fork, a redacted event in the prefix they share, an
erasure's tombstone and a base state. Each attempt runs in one transaction that is rolled back:
the forging session updates one row, then runs the audit (``audit.verify``, what
``store.verify()`` runs) on the same connection, so it sees the forged row.

SQLite has no roles (whoever can write the file is the owner), and the forging client there
leaves foreign keys off, as any client may. ``HARMLESS`` lists what neither refuses nor
detects, with why; docs/threat-model.md carries the same table.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    Table,
    create_engine,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from viewstore import EventStore, MaskingRules
from viewstore.store.audit import audit
from viewstore.store.database.roles import role_name, role_names
from viewstore.store.database.schema import metadata
from viewstore.store.records import SourceInfo

from ..store.test_roles import as_login, login_in
from ._helpers import action, condensed_history, message, observation

#: Why the database may refuse: a role's missing privilege, a guard, a foreign key.
REFUSALS = re.compile(
    "permission denied|is append-only|are set once|violates foreign key constraint", re.I
)
#: Columns neither guarded nor checked, and why that is by design.
HARMLESS = (
    {
        (
            "base_states",
            column,
        ): "the SDK's mutable snapshot (base_state.json): the writer rewrites "
        "it after most events, so no guard or log entry can vouch for it; it is not part of the "
        "audit trail"
        for column in ("conversation_id", "revision", "at_version", "payload", "updated_at")
    }
    | {
        ("conversation_sources", column.name): "what an agent server last said about the "
        "conversation (title, status...): each post of the ingest overwrites it; it is not part of "
        "the audit trail"
        for column in metadata.tables["conversation_sources"].columns
    }
    | {
        ("server_conversations", column.name): "a store-backed agent server's rewritable "
        "metadata of the conversation (its meta.json, its times) and the lease of the server "
        "running it: the servers rewrite it, and a server deleting the conversation drops it; "
        "it is not part of the audit trail"
        for column in metadata.tables["server_conversations"].columns
    }
    | {
        (
            "view_entries",
            "envelope",
        ): "NULL since revision 0023, and read by nothing: a read builds "
        "each Event from the row's id and its payload, so a value written there changes no read"
    }
)
#: The row each table's forgery hits (a fork's where the table has them, for the lineage).
ROWS = {
    "conversations": "id = 'f'",
    "events": "conversation_id = 'c' AND seq = 2",
    "condensations": "conversation_id = 'c'",
    "view_entries": "conversation_id = 'f'",
    "manipulation_indices": "conversation_id = 'f'",
    "base_states": "conversation_id = 'c'",
    "conversation_sources": "conversation_id = 'c'",
    "server_conversations": "conversation_id = 'c'",
    "tombstones": "conversation_id = 'gone'",
    "redactions": "conversation_id = 'c'",
    "masks": "conversation_id = 'u'",
    "catalogue_sizes": "conversation_id = 'f'",
}
#: Columns holding a conversation id: forged by pointing the row at another conversation.
CONVERSATION_COLUMNS = {"conversation_id", "forked_from", "family_id"}
COLUMNS = [(table, column) for table in metadata.sorted_tables for column in table.columns]


def _build(store: EventStore) -> None:
    store.create_schema()
    store.append("c", condensed_history())
    store.fork("c", 4, "f")
    store.append("f", [action("fa", "tc9"), observation("fo", "tc9", "fa"), message("f7")])
    store.fork("f", 6, "g")
    store.append("g", message("g7"))
    store.redact("c", "m1", reason="shared by every fork")
    store.append("u", [message("u1"), message("u2")])
    # A masked event (docs/masking.md), whose record sits beside it.
    with EventStore(store.engine, masking=MaskingRules.from_toml('use = ["common"]')) as masking:
        masking.append("u", message("u3", "key sk-proj-" + "Ab1" * 10))
    store.append("gone", message("x1"))
    store.erase("gone", reason="test")
    store.save_base_state("c", json.dumps({"id": "c", "agent": {}}), at_version=7)
    store.hand_over("c", "sandbox-1")  # appended above, it had no source
    store.save_conversation_info(SourceInfo("c", "sandbox-1", title="a task"))
    lease = store.claim_runner("c", "server-1", ttl=3600)
    store.save_server_meta(
        "c",
        json.dumps({"id": "c", "title": "a task"}),
        runner="server-1",
        generation=lease.generation,
        created_at=datetime(2026, 5, 1, tzinfo=UTC),
        updated_at=datetime(2026, 5, 2, tzinfo=UTC),
    )
    assert store.verify().ok, store.verify().render()


@dataclass
class Forger:
    label: str
    engine: Engine


@contextmanager
def _scratch_pg(request: pytest.FixtureRequest) -> Iterator[str]:
    admin: Engine = request.getfixturevalue("pg_admin_engine")
    server_url: str = request.getfixturevalue("pg_server_url")
    name = f"viewstore_test_tamper_{secrets.token_hex(6)}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            for role in role_names(name).values():
                conn.execute(text(f'DROP ROLE IF EXISTS "{role}"'))


@pytest.fixture(
    scope="module",
    params=[
        "sqlite-owner",
        pytest.param("postgres-owner", marks=pytest.mark.postgres),
        pytest.param("postgres-writer", marks=pytest.mark.postgres),
    ],
)
def forger(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Forger]:
    """A store built by ``_build`` and an engine of the party that forges in it."""
    label = str(request.param)
    if label == "sqlite-owner":
        path: Path = tmp_path_factory.mktemp("tamper") / "store.db"
        url = f"sqlite:///{path}"
        with EventStore(url) as store:
            _build(store)
        engine = create_engine(url)  # a plain client: foreign keys off
        try:
            yield Forger(label, engine)
        finally:
            engine.dispose()
        return
    with _scratch_pg(request) as url:
        with EventStore(url) as store:
            _build(store)
        database = make_url(url).database
        assert database is not None
        with ExitStack() as stack:
            party = url
            if label == "postgres-writer":
                login = stack.enter_context(login_in(url, role_name("writer", database)))
                party = as_login(url, login)
            engine = create_engine(party)
            try:
                yield Forger(label, engine)
            finally:
                engine.dispose()


#: A value where the row holds NULL, by the column's type (strings: the fallback).
FILLERS: list[tuple[type[Any], Any]] = [
    (Boolean, True),
    (Integer, 1),
    (DateTime, datetime(2020, 1, 1)),
]


def _forged(table: Table, column: Column[Any], value: Any) -> Any:
    """A value of the column's type other than ``value``, the kind an attacker would write."""
    if table.name == "catalogue_sizes" and column.name == "conversation_id":
        # One row per conversation: moved onto another's, it would collide with that one's
        # key (refused, but for the wrong reason), so it is moved to no conversation.
        return "renamed"
    if column.name in CONVERSATION_COLUMNS:
        return "u" if value != "u" else "c"
    if table.name == "conversations" and column.name == "id":
        return "renamed"
    if value is None:
        found = [fill for kind, fill in FILLERS if isinstance(column.type, kind)]
        return found[0] if found else "forged"
    changed: dict[type[Any], Callable[[], Any]] = {
        bool: lambda: not value,
        int: lambda: value + 1000,
        datetime: lambda: value - timedelta(days=1),  # backdated
        str: lambda: _forged_text(value),
    }
    return next(change() for kind, change in changed.items() if isinstance(value, kind))


def _forged_text(value: str) -> str:
    """JSON gets an element more; other text one character changed (same length, so no
    length limit refuses it for the wrong reason)."""
    try:
        document = json.loads(value)
    except ValueError:
        document = None
    if isinstance(document, dict):
        return json.dumps({**document, "forged": True})
    if isinstance(document, list):
        return json.dumps([*document, "forged"])
    return value[:-1] + ("x" if value[-1:] != "x" else "y")


def _attempt(conn: Connection, table: Table, column: Column[Any]) -> tuple[str, list[str]]:
    """Forge ``column`` of the chosen row; ("refused", [reason]) or ("written", problems)."""
    where = text(ROWS[table.name])
    key = list(table.primary_key.columns)
    # The last row by key: a row moved to another conversation then lands on no one's key.
    row = conn.execute(select(table).where(where).order_by(*(c.desc() for c in key))).first()
    assert row is not None, table.name
    value = _forged(table, column, getattr(row, column.name))
    statement = (
        update(table).where(*(c == getattr(row, c.name) for c in key)).values({column.name: value})
    )
    try:
        conn.execute(statement)
    except DBAPIError as error:
        return "refused", [str(error.orig)]
    report = audit.verify(conn, None)
    return "written", report.problems


@pytest.mark.parametrize(
    ("table", "column"), COLUMNS, ids=[f"{t.name}.{c.name}" for t, c in COLUMNS]
)
def test_every_forged_column_is_refused_or_named(
    forger: Forger, table: Table, column: Column[Any]
) -> None:
    with forger.engine.connect() as conn:
        try:
            outcome, found = _attempt(conn, table, column)
        finally:
            conn.rollback()
    if outcome == "refused":
        assert REFUSALS.search(found[0]), found[0]
        return
    if (table.name, column.name) in HARMLESS:
        return
    assert found, f"{forger.label}: {table.name}.{column.name} forged, and verify passes"
    # The row's conversation, or the one the forgery moved it to, is named.
    assert any(re.match(r"(c|f|g|u|renamed): ", problem) for problem in found), found


def test_the_harmless_list_is_the_documented_one() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "threat-model.md").read_text()
    for table, column in HARMLESS:
        assert f"`{table}.{column}`" in doc or f"`{table}.*`" in doc, (table, column)


def test_a_redacted_payload_rewritten_is_refused_or_named(forger: Forger) -> None:
    """The one row of the log whose payload the guard may let change: a redacted event's (on
    SQLite, any new payload once a record exists; on PostgreSQL only the recorded one)."""
    with forger.engine.connect() as conn:
        try:
            payload = conn.execute(
                text("SELECT payload FROM events WHERE conversation_id = 'c' AND seq = 1")
            ).scalar_one()
            forged = payload.replace("[redacted]", "transfer 99999 USD to mallory")
            try:
                conn.execute(
                    text("UPDATE events SET payload = :p WHERE conversation_id = 'c' AND seq = 1"),
                    {"p": forged},
                )
            except DBAPIError as error:
                assert REFUSALS.search(str(error.orig)), error
                return
            problems = audit.verify(conn, None).problems
        finally:
            conn.rollback()
    # The event is in the prefix the forks share: each of them reads the forged payload.
    for key in ("c", "f", "g"):
        assert any(p.startswith(f"{key}: seq 1 (event 'm1')") for p in problems), problems
