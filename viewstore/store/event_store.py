"""The EventStore: the one public entry to the database.

Every public method is one transaction, opened here; the helpers in ``rows``, ``reads`` and
``audit`` take the connection and never commit. Driver errors are translated on the way out
by ``translated()``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine

from viewstore.chain import resolve_key
from viewstore.errors import (
    ConcurrencyError,
    DuplicateEventError,
    InvalidArgumentError,
)
from viewstore.events import Event, Role, parse_event
from viewstore.projector import Projection, ProjectionState, needs_view, project
from viewstore.store import (
    anchors,
    audit,
    base_state,
    fast_path,
    locks,
    migrate,
    overview,
    reads,
    resume_check,
    rows,
    slow,
)
from viewstore.store.base_state import BaseState
from viewstore.store.catalogue import (
    ConversationInfo,
    Order,
    check_options,
    count_catalogue,
    read_catalogue,
)
from viewstore.store.engine import (
    WRITE,
    check_engine,
    check_schema,
    check_supported,
    create_engine_for,
    default_url,
)
from viewstore.store.feed import FeedEntry, check_limit, decode_cursor, read_feed
from viewstore.store.inputs import (
    DEFAULT_MAX_EVENT_BYTES,
    EventInput,
    check_integer,
    conversation_key,
    new_conversation_key,
    parse_batch,
)
from viewstore.store.records import (
    AppendResult,
    CondensationRecord,
    StoredEvent,
    StoredView,
    VerifyReport,
)
from viewstore.store.translate import translated
from viewstore.view import View

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

alembic_config = migrate.alembic_config  # where the tests and tools have always found it

logger = logging.getLogger("viewstore.store")

#: Crash-point injection for tests (tests/ops): when set, called inside every append's
#: transaction with "after_events", "after_view_rows" and "before_commit". None in production.
append_hook: Callable[[str], None] | None = None


def _at(point: str) -> None:
    if append_hook is not None:
        append_hook(point)


class EventStore:
    """Events, condensations, and each conversation's live view and indices, in SQL.

    ``url_or_engine``: a database URL (default: ``VIEWSTORE_URL``, else
    ``sqlite:///viewstore.db``), or an engine made by ``viewstore.create_engine`` (which
    applies the settings the store relies on; see ``check_engine``). ``schema``: on
    PostgreSQL, the schema the store's tables live in (created by ``create_schema``), so an
    application's own tables of the same names in ``public`` are never touched.
    """

    def __init__(
        self,
        url_or_engine: str | Engine | None = None,
        *,
        schema: str | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        chain_key: str | bytes | None = None,
    ) -> None:
        """``chain_key``: a secret that makes each event's hash an HMAC only its holders can
        compute (default: ``VIEWSTORE_CHAIN_KEY``; neither: plain SHA-256). Every writer and
        every verifier of a keyed store needs the same key; it is never stored."""
        self._chain_key = resolve_key(chain_key)
        check_schema(schema)
        if isinstance(url_or_engine, Engine):
            check_supported(url_or_engine.url)
            check_engine(url_or_engine, schema)
            self.engine = url_or_engine
            self._owns_engine = False
        else:
            self.engine = create_engine_for(url_or_engine or default_url(), schema=schema)
            self._owns_engine = True
        self.schema = schema
        self.max_event_bytes = check_integer("max_event_bytes", max_event_bytes, minimum=1)
        self._tails = fast_path.Tails()
        self._slow = slow.threshold()

    # -- lifecycle ----------------------------------------------------------------------

    def create_schema(self) -> None:
        """Migrate the database to the newest schema (``alembic upgrade head``), in its own
        version table (``viewstore_alembic_version``; see ``viewstore.store.migrate``).

        A revision this code does not know (a newer viewstore's, another application's) raises
        ``SchemaMismatchError`` and nothing is migrated.

        Processes that run it at once on one database take turns: the migration, and the
        check of the revision it starts from, run under a lock (see ``revisions.migration_lock``),
        so one migrates and the others then find the schema at head.
        """
        with translated():
            migrate.upgrade(self.engine, self.schema)

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at (``None``: no viewstore schema yet)."""
        with translated():
            return migrate.current_revision(self.engine, self.schema)

    def close(self) -> None:
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with translated(), self.engine.execution_options(**WRITE).begin() as conn:
            yield conn

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A write transaction on the store's engine, committed at the end of the block (rolled
        back on an exception), for an application that writes its own rows and appends events
        together: ``store.append(..., connection=conn)`` inside it.

        Any transaction of the store's engine serves as well; this one is begun as a writer,
        which matters on SQLite: a transaction begun as a reader that later writes fails at
        once, instead of waiting, when another writer committed since it began.
        """
        with self._write() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        # One snapshot for the several statements of a read (SQLite: BEGIN; PostgreSQL:
        # REPEATABLE READ), so a read never mixes two versions of a conversation.
        options: dict[str, Any] = {}
        if self.engine.dialect.name == "postgresql":
            options["isolation_level"] = "REPEATABLE READ"
        with translated(), self.engine.execution_options(**options).begin() as conn:
            yield conn

    # -- writing ------------------------------------------------------------------------

    def append(
        self,
        conversation_id: str | uuid.UUID,
        events: EventInput | Iterable[EventInput],
        *,
        expected_version: int | None = None,
        connection: Connection | Session | None = None,
    ) -> AppendResult:
        """Append events to a conversation in one transaction, projecting its view.

        ``expected_version`` (the number of events the caller saw, 0 for a new conversation)
        makes the append conditional: a mismatch raises ``ConcurrencyError`` before anything
        is written, unless the call is an exact retry of events already stored there.

        ``connection``: a SQLAlchemy ``Connection`` (or an ORM ``Session``) of the store's
        engine, in the caller's transaction. The append then joins that transaction instead of
        opening one: the caller's own rows and the events commit, or roll back, together, and
        the caller commits. The append runs in a savepoint, so when it raises, nothing of it
        is written and the caller's transaction goes on. See ``begin()``.
        """
        key = new_conversation_key(conversation_id)
        batch = parse_batch(events, self.max_event_bytes)
        if expected_version is not None:
            check_integer("expected_version", expected_version)
        if connection is not None:
            return self._append_in(self._callers(connection), key, batch, expected_version)
        fast = self._fast_append(key, batch, expected_version)
        if fast is not None:
            return fast
        with self._write() as conn:
            result, tail = self._append(conn, key, batch, expected_version)
        if tail is not None:  # committed: the next append here may take the fast path
            self._tails.put(key, tail)
        return result

    def _callers(self, connection: Connection | Session) -> Connection:
        conn = connection if isinstance(connection, Connection) else connection.connection()
        if conn.engine.dialect is not self.engine.dialect:  # another engine: the same rules
            check_engine(conn.engine, self.schema)
        return conn

    def _append_in(
        self, conn: Connection, key: str, batch: list[Event], expected: int | None
    ) -> AppendResult:
        """The ordinary path inside the caller's transaction. No fast path: it commits on its
        own. No tail is kept: the caller may still roll back, and the next append of this
        store reads the row again (the one it may have has gone stale here)."""
        self._tails.drop(key)
        with translated(), conn.begin_nested():
            result, _tail = self._append(conn, key, batch, expected)
        return result

    def _fast_append(
        self, key: str, batch: list[Event], expected: int | None
    ) -> AppendResult | None:
        """The fast path (see ``fast_path``), or None when this append cannot take it."""
        tail = self._tails.get(key)
        if (
            tail is None
            or append_hook is not None  # crash points exist only on the ordinary path
            or not batch
            or len(batch) > fast_path.BATCH_LIMIT
            or expected not in (None, tail.state.version)
            or needs_view(batch)
        ):
            return None
        plan = fast_path.plan(key, tail, batch, datetime.now(UTC), self._chain_key)
        if not self._write_plan(plan):
            self._tails.drop(key)  # stale, or a stored id: the ordinary path will tell
            logger.debug("fast path stepped aside for %r (another writer, or a stored id)", key)
            return None
        self._tails.put(key, plan.tail)
        return AppendResult(
            conversation_id=key,
            version=plan.tail.state.version,
            appended=[e.id for e in batch],
            first_seq=tail.state.version + 1,
            rows_written=plan.projection.rows_written,
        )

    def _write_plan(self, plan: fast_path.Plan) -> bool:
        """Commit the plan; False when it was stale or hit a stored id (nothing written)."""
        started = time.perf_counter()
        with translated():
            if self.engine.dialect.name == "postgresql":
                written = fast_path.write_postgres(self.engine, plan)
            else:
                written = fast_path.write_sqlite(self.engine, plan)
        slow.report(time.perf_counter() - started, self._slow, "fast-path append")
        return written

    def _append(
        self, conn: Connection, key: str, batch: list[Event], expected: int | None
    ) -> tuple[AppendResult, fast_path.Tail | None]:
        now = datetime.now(UTC)
        row, maybe_stored = rows.lock_for_append(conn, key, [e.id for e in batch])
        if row is None and not batch:
            return AppendResult(conversation_id=key, version=0), None
        if row is None and not expected:
            # Create the row (or wait for a racing creator's and lock it) before any check, so
            # the version and dedupe checks below see what a concurrent first append wrote.
            row = rows.create_conversation(conn, key, now)
        version = 0 if row is None else row.version
        tail = None
        if row is not None:
            now = rows.not_before(now, row.updated_at)
            tail = fast_path.Tail(rows.state_from_row(row), row.last_hash, row.updated_at)
        if expected is not None and expected != version:
            retry = self._as_retry(conn, key, batch, expected, version)
            if retry is not None:
                return retry, tail
            logger.info("conflict on %r: expected version %d, found %d", key, expected, version)
            raise ConcurrencyError(key, expected, version)
        stored = rows.stored_payloads(conn, key, [e.id for e in batch]) if maybe_stored else {}
        duplicates: list[str] = []
        fresh: list[Event] = []
        for event in batch:
            previous = stored.get(event.id)
            if previous is None:
                fresh.append(event)
            elif event.same_payload(parse_event(previous)):
                duplicates.append(event.id)
            else:
                raise DuplicateEventError(key, event.id, "already stored with a different payload")
        if not fresh:
            result = AppendResult(conversation_id=key, version=version, duplicates=duplicates)
            return result, tail
        assert row is not None and tail is not None  # created above unless expected > 0
        state = tail.state
        numbered = list(enumerate(fresh, start=version + 1))
        log, last_hash = rows.log_rows(key, numbered, row.last_hash, now, self._chain_key)
        rows.insert_events(conn, log)
        _at("after_events")
        projection = self._project(conn, key, state, numbered)
        rows.write_projection(conn, key, projection)
        condensed = [(seq, e) for seq, e in numbered if e.role is Role.CONDENSATION]
        if condensed:
            rows.insert_condensations(conn, key, condensed, projection.forgotten)
        _at("after_view_rows")
        rows.save_state(conn, key, projection.state, last_hash, now)
        _at("before_commit")
        result = AppendResult(
            conversation_id=key,
            version=projection.state.version,
            appended=[e.id for e in fresh],
            duplicates=duplicates,
            first_seq=version + 1,
            rows_written=projection.rows_written,
        )
        return result, fast_path.Tail(projection.state, last_hash, now)

    def _as_retry(
        self, conn: Connection, key: str, batch: list[Event], expected: int, version: int
    ) -> AppendResult | None:
        """An exact resend of events already stored right after ``expected``: a no-op."""
        if not batch or expected + len(batch) > version:
            return None
        stored = rows.payloads_at(conn, key, expected + 1, expected + len(batch))
        if len(stored) != len(batch):
            return None
        for event, payload in zip(batch, stored, strict=True):
            if not event.same_payload(parse_event(payload)):
                return None
        return AppendResult(conversation_id=key, version=version, duplicates=[e.id for e in batch])

    def _project(
        self,
        conn: Connection,
        key: str,
        state: ProjectionState,
        numbered: list[tuple[int, Event]],
    ) -> Projection:
        if needs_view(e for _, e in numbered):
            return project(
                state,
                numbered,
                view=rows.load_current_view(conn, key),
                open_indices=rows.load_open_indices(conn, key),
            )
        return project(state, numbered)

    # -- reading ------------------------------------------------------------------------

    def view(self, conversation_id: str | uuid.UUID, *, as_of: int | None = None) -> StoredView:
        """The live view from the view rows: now, or right after event ``as_of``."""
        key = conversation_key(conversation_id)
        if as_of is not None:
            check_integer("as_of", as_of)
        with self._read() as conn:
            if as_of is not None:
                self._check_seq(conn, key, as_of)
            return reads.read_view(conn, key, as_of)

    def _check_seq(self, conn: Connection, key: str, seq: int) -> int:
        version: int = reads.conversation_row(conn, key).version
        if not 0 <= seq <= version:
            raise InvalidArgumentError(
                f"as_of must be an integer between 0 and {version} for {key!r}, got {seq!r}"
            )
        return version

    def events(
        self, conversation_id: str | uuid.UUID, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        key = conversation_key(conversation_id)
        if limit is not None:
            check_integer("limit", limit)
        check_integer("after", after)
        with self._read() as conn:
            return reads.read_events(conn, key, after=after, limit=limit)

    def version(self, conversation_id: str | uuid.UUID) -> int:
        key = conversation_key(conversation_id)
        with self._read() as conn:
            value: int = reads.conversation_row(conn, key).version
            return value

    def conversations(
        self,
        *,
        order_by: Order = "id",
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
        updated_since: datetime | None = None,
        min_view_length: int | None = None,
        search: str = "",
    ) -> list[ConversationInfo]:
        """The catalogue: one :class:`ConversationInfo` per conversation (id, times, version,
        view length, request flag, last event kind), read from the conversation rows alone.

        ``order_by`` one of ``id`` (default), ``created_at``, ``updated_at``, ``version``,
        ``view_length`` (ties in id order; ``descending`` reverses both); ``limit`` and
        ``offset`` page through it; ``updated_since`` (an aware datetime) keeps conversations
        appended to at or after it, ``min_view_length`` those whose live view holds at least
        that many events; ``search`` those whose id contains that text. How many match:
        :meth:`conversation_count`; only the ids: :meth:`conversation_ids`.
        """
        check_options(
            search=search,
            order_by=order_by,
            limit=limit,
            offset=offset,
            updated_since=updated_since,
            min_view_length=min_view_length,
        )
        with self._read() as conn:
            return read_catalogue(
                conn,
                search=search,
                order_by=order_by,
                descending=descending,
                limit=limit,
                offset=offset,
                updated_since=updated_since,
                min_view_length=min_view_length,
            )

    def conversation_ids(self) -> list[str]:
        """Every conversation id, sorted (what ``conversations()`` returned before the
        catalogue)."""
        with self._read() as conn:
            return reads.conversation_ids(conn)

    def conversation_count(
        self,
        *,
        search: str = "",
        updated_since: datetime | None = None,
        min_view_length: int | None = None,
    ) -> int:
        """How many conversations ``conversations()`` would list with these filters."""
        check_options(
            search=search,
            order_by="id",
            limit=None,
            offset=0,
            updated_since=updated_since,
            min_view_length=min_view_length,
        )
        with self._read() as conn:
            return count_catalogue(
                conn, search=search, updated_since=updated_since, min_view_length=min_view_length
            )

    def condensations(
        self, conversation_id: str | uuid.UUID, *, upto: int | None = None
    ) -> list[CondensationRecord]:
        """The conversation's condensations in seq order (those at or before ``upto``)."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            if upto is not None:
                self._check_seq(conn, key, upto)
            return overview.condensation_records(conn, key, upto=upto)

    def condensation(self, conversation_id: str | uuid.UUID, seq: int) -> CondensationRecord | None:
        """The condensation at ``seq``, or None if the event there is not one."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            self._check_seq(conn, key, seq)
            found = overview.condensation_records(conn, key, upto=None, seq=seq)
        return found[0] if found else None

    def forgotten_by(
        self, conversation_id: str | uuid.UUID, event_ids: Iterable[str], *, upto: int | None = None
    ) -> dict[str, int]:
        """Which of ``event_ids`` a condensation forgot (at or before ``upto``), each with the
        seq of the first condensation that did."""
        key = conversation_key(conversation_id)
        ids = [str(event_id) for event_id in event_ids]
        with self._read() as conn:
            if upto is not None:
                self._check_seq(conn, key, upto)
            return overview.forgotten_by(conn, key, ids, upto=upto) if ids else {}

    def event(self, conversation_id: str | uuid.UUID, event_id: str) -> StoredEvent | None:
        """The stored event with this id, or None if the conversation has none."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return overview.event_by_id(conn, key, str(event_id))

    def _log(self, key: str, as_of: int | None = None) -> tuple[int, list[Event]]:
        if as_of is not None:
            check_integer("as_of", as_of)
        with self._read() as conn:
            version = reads.conversation_row(conn, key).version
            if as_of is not None:
                self._check_seq(conn, key, as_of)
            stored = reads.read_events(conn, key, upto=as_of)
        return (version if as_of is None else as_of), [
            parse_event(event.payload_json) for event in stored
        ]

    def resume_view(self, conversation_id: str | uuid.UUID) -> StoredView:
        """The resume semantics: ``View.from_events`` over the whole log, as OpenHands
        computes it when it loads a conversation (computed, not stored)."""
        key = conversation_key(conversation_id)
        version, log = self._log(key)
        return _stored(key, version, View.from_events(log), None)

    def replay(self, conversation_id: str | uuid.UUID, *, as_of: int | None = None) -> StoredView:
        """The live view recomputed from the log by the pure engine (no view rows read)."""
        key = conversation_key(conversation_id)
        version, log = self._log(key, as_of)
        view = View()
        for event in log:
            view.append_event(event)
        return _stored(key, version, view, as_of)

    def feed(self, after: str | None = None, limit: int = 1000) -> list[FeedEntry]:
        """Events of all conversations in commit order, after the cursor ``after``.

        Store the last entry's ``cursor`` and pass it as ``after`` next time: no event is ever
        skipped or repeated (see ``viewstore.store.feed``). Fewer than ``limit`` entries (even
        none) does not mean the end: more may commit later.
        """
        if after is not None:
            decode_cursor(after)
        check_limit(limit)
        with self._read() as conn:
            return read_feed(conn, after, limit)

    # -- adapters: the OpenHands SDK's base state and lock (viewstore.openhands) --------

    def save_base_state(
        self, conversation_id: str | uuid.UUID, payload: str | bytes, *, at_version: int
    ) -> int:
        """Store a conversation's base state (the SDK's ``base_state.json``), in one
        transaction; returns its revision.

        ``at_version`` is the number of events the writer has seen: if the conversation has
        moved on since, the snapshot is stale and ``ConcurrencyError`` is raised, nothing
        written (a stale HEAD would detach the newer events from the active branch).
        """
        key = conversation_key(conversation_id)
        text = base_state.check_payload(payload)
        if isinstance(at_version, bool) or not isinstance(at_version, int) or at_version < 0:
            raise InvalidArgumentError(
                f"at_version must be a non-negative integer, got {at_version!r}"
            )
        with self._write() as conn:
            return base_state.save(conn, key, text, at_version, datetime.now(UTC))

    def base_state(self, conversation_id: str | uuid.UUID) -> BaseState | None:
        """The newest base state with the conversation's version, or None if never written."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return base_state.load(conn, key)

    def log_index(self, conversation_id: str | uuid.UUID) -> list[tuple[str, str, str | None]]:
        """``(event_id, kind, parent_id)`` of every event in seq order, without payloads
        (empty for an unknown conversation): what an adapter needs to list a log."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return reads.log_index(conn, key)

    def live_equals_resume(self, conversation_id: str | uuid.UUID) -> bool:
        """Whether the live view equals the resume view (``resume_view()``), decided from
        narrow columns without reading a payload (see ``viewstore.store.resume_check``)."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            reads.conversation_row(conn, key)
            return resume_check.live_equals_resume(conn, key)

    @contextmanager
    def conversation_lock(
        self, conversation_id: str | uuid.UUID, *, timeout: float = 30.0
    ) -> Iterator[None]:
        """Exclude other holders of this conversation's lock, in any process (see
        ``viewstore.store.locks``); ``TimeoutError`` after ``timeout`` seconds."""
        key = conversation_key(conversation_id)
        with translated(), locks.conversation_lock(self.engine, key, timeout):
            yield

    # -- audit --------------------------------------------------------------------------

    def verify(
        self, conversation_id: str | uuid.UUID | None = None, *, against: Any = None
    ) -> VerifyReport:
        """Check the hash chain, that every column derived from the log equals what the log
        says, and that every view and index row equals a pure replay.

        ``against``: a checkpoint (``checkpoint()``'s dict or its JSON text). Every history it
        saw must still be there, unchanged up to its head, under the same conversation id;
        ``CheckpointError`` if it is not a checkpoint or its digest does not match.
        """
        keys = None if conversation_id is None else [conversation_key(conversation_id)]
        anchor = None if against is None else anchors.parse(against)
        with self._read() as conn:
            return audit.verify(conn, keys, anchor, self._chain_key)

    def checkpoint(self) -> dict[str, Any]:
        """The chain head (seq, hash, recorded time) of every conversation, one digest over
        them all and the time, as a JSON-serialisable dict: keep it outside the database and
        pass it to ``verify(against=...)`` later (see docs/threat-model.md)."""
        with self._read() as conn:
            return anchors.take(conn)

    def rebuild(self, conversation_id: str | uuid.UUID | None = None) -> int:
        """Rewrite the view and index rows of one or every conversation from the log."""
        keys = None if conversation_id is None else [conversation_key(conversation_id)]
        self._tails.clear()  # a rebuild rewrites the carried state from the log
        with self._write() as conn:
            return audit.rebuild(conn, keys)


def _stored(key: str, version: int, view: View, as_of: int | None) -> StoredView:
    return StoredView(
        conversation_id=key,
        version=version,
        events=view.events,
        manipulation_indices=sorted(view.manipulation_indices),
        unhandled_condensation_request=view.unhandled_condensation_request,
        as_of=as_of,
    )
