"""Every statement the store sends about one conversation names that conversation for every
table it touches, so a server that shards the tables by conversation (Citus) can route it to
one shard (docs/distribution.md).

The statements are captured where they leave for the server: a psycopg cursor that records
what it executes, installed on every connection of the store's engine. That sees the
store's own driver-level reads and the fast path too, not only SQLAlchemy's statements.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
from sqlalchemy import event, text

import viewstore
from viewstore import EventStore
from viewstore.domain.errors import ConcurrencyError
from viewstore.store.database import translate

ON_POSTGRES = (
    pytest.mark.postgres,
    pytest.mark.parametrize("db_url", ["postgres"], indirect=True),
)

#: The tables a sharded store distributes by conversation, and the column that names it.
DISTRIBUTED = {
    "events": "conversation_id",
    "view_entries": "conversation_id",
    "manipulation_indices": "conversation_id",
    "condensations": "conversation_id",
    "condensation_forgotten": "conversation_id",
    "base_states": "conversation_id",
    "redactions": "conversation_id",
    "conversations": "id",
}
_REFERENCE = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE)\s+(?:\"?\w+\"?\.)?\"?(" + "|".join(DISTRIBUTED) + r")\"?"
    r"(?:\s+(?:AS\s+)?(?!WHERE|SET|ON|JOIN|ORDER|GROUP|LIMIT|VALUES|FOR|LEFT|RIGHT|INNER|"
    r"OUTER|CROSS|USING|RETURNING|UNION)(\w+))?",
    re.IGNORECASE,
)


class _Recorder:
    statements: ClassVar[list[str]] = []


class _RecordingCursor(psycopg.Cursor[Any]):
    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        _Recorder.statements.append(str(query))
        return super().execute(query, params, **kwargs)

    def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> Any:
        _Recorder.statements.append(str(query))
        return super().executemany(query, params_seq, **kwargs)


def _unrouted(statement: str) -> list[str]:
    """The distributed tables ``statement`` reads or writes without naming one conversation
    by equality (an INSERT of VALUES names it in the row itself)."""
    flat = " ".join(statement.split())
    if re.match(r"\s*INSERT\b", flat, re.IGNORECASE) and not re.search(
        r"\bSELECT\b", flat, re.IGNORECASE
    ):
        return []
    missing = []
    for match in _REFERENCE.finditer(flat):
        table, alias = match.group(1).lower(), match.group(2)
        column = DISTRIBUTED[table]
        names = {table, alias} if alias else {table}
        qualified = any(
            re.search(rf"\b{re.escape(name)}\.{column}\s*=\s*[%:$(]", flat) for name in names
        )
        bare = re.search(rf"(?<![\w.]){column}\s*=\s*[%:$(]", flat)
        if not (qualified or bare):
            missing.append(table)
    return missing


#: Statements about no one conversation, on purpose: listing and counting every
#: conversation, the change feed, migrations and the store-wide audit (docs/distribution.md).
EXEMPT = (
    "viewstore_alembic_version",
    "pg_advisory",
    "pg_snapshot_xmin",
    "FROM conversations ORDER BY",
    "FROM conversations LEFT OUTER JOIN events",
    "count(*) AS count_1 FROM conversations",
    # A conversation's forks, found by the source they name (an index scan on every shard):
    # before erasing it, and when a redaction reaches the forks that share the event.
    "WHERE conversations.forked_from =",
    # The inactive scan (prune): a range of the updated_at index, then which of those
    # candidates are fork sources (an index scan on every shard).
    "WHERE conversations.updated_at <",
    # Compaction's sweep over every conversation, a page of ids at a time (docs/retention.md).
    "WHERE conversations.id >",
    "WHERE conversations.forked_from IN",
)


@pytest.fixture
def recorded(db_url: str) -> Iterator[EventStore]:
    engine = viewstore.create_engine(db_url)

    @event.listens_for(engine, "connect")
    def _record(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.cursor_factory = _RecordingCursor

    store = EventStore(engine, fast_path=False)  # as on Citus (docs/distribution.md)
    store.create_schema()
    _Recorder.statements = []
    yield store
    store.close()
    engine.dispose()


def _workload(store: EventStore, vectors_dir: Path) -> None:
    """One of each thing the store does to a conversation."""
    for case in sorted((vectors_dir / "cases").glob("*.jsonl"))[:6]:
        lines = [json.loads(line) for line in case.read_text().splitlines()]
        store.append(case.stem, lines[:3])
        for line in lines[3:]:
            store.append(case.stem, line)
        store.append(case.stem, lines[0])  # a resend
        with pytest.raises(ConcurrencyError):
            store.append(case.stem, {"kind": "MessageEvent", "id": "late"}, expected_version=1)
        version = store.version(case.stem)
        store.view(case.stem)
        store.view(case.stem, as_of=version // 2)
        store.view_page(case.stem, as_of=version // 2, first=0, limit=2)
        store.in_view(case.stem, ["a", "b"], as_of=1)
        store.events(case.stem, after=1, limit=3)
        store.resume_view(case.stem)
        store.replay(case.stem, as_of=version // 2)
        store.condensations(case.stem)
        store.condensation(case.stem, version)
        store.forgotten_by(case.stem, ["a"])
        store.event(case.stem, lines[0]["id"])
        store.log_index(case.stem)
        store.live_equals_resume(case.stem)
        store.save_base_state(case.stem, "{}", at_version=version)
        store.base_state(case.stem)
        with store.conversation_lock(case.stem, timeout=5):
            pass
        assert store.verify(case.stem).ok
        store.rebuild(case.stem)
        fork = store.fork(case.stem, max(1, version // 2))
        store.append(fork, {"kind": "MessageEvent", "id": f"{fork}-m"})
        store.append(fork, {"kind": "MessageEvent", "id": f"{fork}-n"})
        store.view(fork, as_of=1)
        store.events(fork)
        store.condensations(fork)
        store.event(fork, lines[0]["id"])
        store.redact(fork, lines[0]["id"], reason="workload")
        store.redactions(fork)
        assert store.verify(fork).ok
        store.rebuild(fork)
        store.compact(case.stem, older_than=timedelta(0), min_freed=-(10**6))
        store.erase(store.fork(case.stem, version), reason="workload")  # past compaction
        store.erase(fork, reason="workload")
    store.inactive_conversations(before=datetime.now(UTC), limit=5)
    store.compact(older_than=timedelta(0), batch=2)
    conversation = f"new-{uuid.uuid4().hex}"
    with store.begin() as conn:
        store.append(conversation, {"kind": "MessageEvent", "id": "m"}, connection=conn)


@ON_POSTGRES[0]
@ON_POSTGRES[1]
def test_every_statement_names_its_conversation(recorded: EventStore, vectors_dir: Path) -> None:
    _Recorder.statements = []
    _workload(recorded, vectors_dir)
    seen = [s for s in _Recorder.statements if not any(mark in s for mark in EXEMPT)]
    assert len(seen) > 50  # the capture works
    offenders = {s: _unrouted(s) for s in seen if _unrouted(s)}
    assert not offenders, "\n\n".join(f"{t}: {s}" for s, t in offenders.items())


@ON_POSTGRES[0]
@ON_POSTGRES[1]
def test_the_fast_path_statement_is_the_one_that_does_not(recorded: EventStore) -> None:
    """Why a sharded store turns the fast path off: its one statement inserts what an
    UPDATE of the conversation row returns, which a sharded server cannot route."""
    fast = EventStore(recorded.engine, server_append=False)
    fast.append("c", {"kind": "MessageEvent", "id": "m1"})
    _Recorder.statements = []
    fast.append("c", {"kind": "MessageEvent", "id": "m2"})
    assert [s for s in _Recorder.statements if _unrouted(s)] == [_Recorder.statements[-1]]


def test_the_check_catches_a_statement_that_does_not() -> None:
    assert _unrouted("SELECT 1 FROM events WHERE seq = %(s)s") == ["events"]
    correlated = (
        "SELECT conversations.id, EXISTS (SELECT events.seq FROM events WHERE "
        "events.conversation_id = conversations.id) FROM conversations "
        "WHERE conversations.id = %(c)s"
    )
    assert _unrouted(correlated) == ["events"]
    assert _unrouted("SELECT seq FROM events WHERE conversation_id = %(c)s") == []
    assert _unrouted("UPDATE conversations SET version=%(v)s WHERE conversations.id = %(c)s") == []


def test_a_duplicate_key_from_a_distributed_server_is_an_integrity_error() -> None:
    """Citus reports a unique violation on a worker as SQLSTATE XX000 with PostgreSQL's
    message; it must be recognised as the duplicate it is."""
    relayed = 'duplicate key value violates unique constraint "uq_events_event_id_102008"'
    assert translate.is_unique_violation("XX000", relayed)
    assert translate.is_unique_violation("23505", "anything")
    assert not translate.is_unique_violation("XX000", "connection to the remote node failed")


@ON_POSTGRES[0]
@ON_POSTGRES[1]
def test_with_the_server_function_the_fast_path_is_one_call(recorded: EventStore) -> None:
    """The fast path's writes as one call of ``viewstore_append_rows`` (migration 0014), whose
    own statements all name the conversation (``WHERE ... = p_key``)."""
    fast = EventStore(recorded.engine)
    fast.append("c", {"kind": "MessageEvent", "id": "m1"})
    fast.append("c", {"kind": "MessageEvent", "id": "m2"})  # finds the function
    _Recorder.statements = []
    fast.append("c", {"kind": "MessageEvent", "id": "m3"})
    assert len(_Recorder.statements) == 1
    assert _Recorder.statements[0].startswith("SELECT viewstore_append_rows(")
    assert [e.event_id for e in fast.events("c")] == ["m1", "m2", "m3"]
    with fast.engine.connect() as conn:
        body = conn.execute(
            text("SELECT prosrc FROM pg_proc WHERE proname = 'viewstore_append_rows'")
        )
        source = " ".join(body.scalar_one().split())
    statements = [s for s in re.split(r";", source) if re.search(r"\b(UPDATE|INSERT)\b", s)]
    assert len(statements) == 5
    for statement in statements:
        assert re.search(r"\b(id|conversation_id) = p_key\b", statement) or re.search(
            r"SELECT p_key,", statement
        ), statement
