"""The EventStore: the one public entry to the database. This module holds appending
(the ordinary path and the fast path), reading a view or a log, and the change feed; the
other methods come from the classes ``EventStore`` joins (see ``viewstore.store.store_core``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from viewstore.domain.errors import (
    ConcurrencyError,
    DuplicateEventError,
    InvalidArgumentError,
    UnsupportedDatabaseError,
)
from viewstore.store.adapter_api import AdapterMethods
from viewstore.store.append.tails import Tail
from viewstore.store.audit_api import AuditMethods
from viewstore.store.browsing_api import Browsing
from viewstore.store.cursors import check_feed_limit, decode_feed_cursor
from viewstore.store.database import migrate, slow
from viewstore.store.database.engine import (
    check_engine,
)
from viewstore.store.database.translate import translated
from viewstore.store.feed.feed import read_feed
from viewstore.store.feed.feed_tail import tail_cursor
from viewstore.store.feed.follow import ListenTarget, follow, listen_target
from viewstore.store.feed.follow_state import DEFAULT_LIMIT, DEFAULT_POLL
from viewstore.store.inputs import check_integer, conversation_key, new_conversation_key
from viewstore.store.lifecycle import erasure
from viewstore.store.read import lineage, reads
from viewstore.store.records import (
    AppendResult,
    FeedEntry,
    StoredEvent,
    StoredView,
    ViewPage,
)
from viewstore.store.retention_api import RetentionMethods
from viewstore.store.runners_api import RunnerMethods
from viewstore.store.search_api import SearchMethods
from viewstore.store.sources_api import SourceInfoMethods
from viewstore.store.store_core import ConversationId

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from viewstore.domain.events import Event
    from viewstore.domain.masking import Masked
    from viewstore.domain.projector import Projection, ProjectionState
    from viewstore.store.append import fast_path
    from viewstore.store.append.batch import EventInput

# Start-up time: the append machinery (the events model and pydantic, the projector, the row
# writers) is imported by the methods that append, so that a store opened to read (every
# read command of the CLI, the viewer) does not import it.

alembic_config = migrate.alembic_config  # where the tests and tools have always found it

logger = logging.getLogger("viewstore.store")

#: Crash-point injection for tests (tests/ops): when set, called inside every append's
#: transaction with "after_events", "after_view_rows" and "before_commit". None in production.
append_hook: Callable[[str], None] | None = None
#: How many times an overtaken ordinary append is run again (rows.check_not_overtaken). The last
#: run does not check: rows restored or moved from elsewhere may carry another server's ids.
OVERTAKEN_RETRIES = 3


def _at(point: str) -> None:
    if append_hook is not None:
        append_hook(point)


class EventStore(
    Browsing,
    AdapterMethods,
    AuditMethods,
    RetentionMethods,
    SearchMethods,
    SourceInfoMethods,
    RunnerMethods,
):
    """Events, condensations, and each conversation's live view and indices, in SQL.

    ``url_or_engine``: a database URL (default: ``VIEWSTORE_URL``, else
    ``sqlite:///viewstore.db``), or an engine made by ``viewstore.create_engine`` (which
    applies the settings the store relies on; see ``check_engine``). ``schema``: on
    PostgreSQL, the schema the store's tables live in (created by ``create_schema``), so an
    application's own tables of the same names in ``public`` are never touched. See
    ``StoreCore`` for the other arguments, and ``store_core`` for how the methods are laid out.
    """

    # -- writing ------------------------------------------------------------------------

    def append(
        self,
        conversation_id: ConversationId,
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
        from viewstore.store.append import rows  # noqa: PLC0415 - start-up time
        from viewstore.store.append.batch import parse_batch  # noqa: PLC0415 - start-up time

        key = new_conversation_key(conversation_id)
        batch = parse_batch(events, self.max_event_bytes)
        masked: dict[str, tuple[Masked, ...]] = {}
        if self.masking is not None:
            batch, masked = self.masking.mask_batch(batch)
        if expected_version is not None:
            check_integer("expected_version", expected_version)
        if connection is not None:
            return self._append_in(self._callers(connection), key, batch, expected_version, masked)
        # A masked event's record is written beside it: the ordinary path's work.
        fast = None if masked else self._fast_append(key, batch, expected_version)
        if fast is not None:
            return fast
        for attempt in range(OVERTAKEN_RETRIES + 1):
            try:
                with self._write() as conn:
                    result, tail = self._append(
                        conn,
                        key,
                        batch,
                        expected_version,
                        in_order=attempt < OVERTAKEN_RETRIES,
                        masked=masked,
                    )
                break
            except rows.Overtaken:
                logger.debug("append to %r overtaken while it waited for the lock: run again", key)
        if tail is not None:  # committed: the next append here may take the fast path
            self._tails.put(key, tail)
        return result

    def _callers(self, connection: Connection | Session) -> Connection:
        conn = connection if isinstance(connection, Connection) else connection.connection()
        if conn.engine.dialect is not self.engine.dialect:  # another engine: the same rules
            check_engine(conn.engine, self.schema)
        return conn

    def _append_in(
        self,
        conn: Connection,
        key: str,
        batch: list[Event],
        expected: int | None,
        masked: dict[str, tuple[Masked, ...]],
    ) -> AppendResult:
        """The ordinary path inside the caller's transaction. No fast path: it commits on its
        own. No tail is kept: the caller may still roll back, and the next append of this
        store reads the row again (the one it may have has gone stale here)."""
        self._tails.drop(key)
        with translated(), conn.begin_nested():
            result, _tail = self._append(conn, key, batch, expected, masked=masked)
        return result

    def _fast_append(
        self, key: str, batch: list[Event], expected: int | None
    ) -> AppendResult | None:
        """The fast path (see ``fast_path``), or None when this append cannot take it."""
        from viewstore.domain.projector import needs_view  # noqa: PLC0415 - start-up time
        from viewstore.store.append import fast_path  # noqa: PLC0415 - start-up time

        tail = self._tails.get(key)
        if (
            tail is None
            or not self._fast
            or append_hook is not None  # crash points exist only on the ordinary path
            or not batch
            or len(batch) > fast_path.BATCH_LIMIT
            or expected not in (None, tail.state.version)
            or needs_view(batch)
        ):
            return None
        if tail.prefix and self._in_prefix(tail.prefix, [e.id for e in batch]):
            return None  # a resend or a clash: the ordinary path tells which
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

    def _in_prefix(self, prefix: tuple[lineage.Segment, ...], ids: list[str]) -> bool:
        with self._read() as conn:
            return lineage.holds_any(conn, prefix, ids)

    def _write_plan(self, plan: fast_path.Plan) -> bool:
        """Commit the plan; False when it was stale or hit a stored id (nothing written)."""
        from viewstore.store.append import fast_path  # noqa: PLC0415 - start-up time

        started = time.perf_counter()
        with translated():
            if self.engine.dialect.name == "postgresql":
                written = fast_path.write_postgres(
                    self.engine, plan, server_function=self._layout.server_function()
                )
            else:
                written = fast_path.write_sqlite(self.engine, plan)
        slow.report(time.perf_counter() - started, self._slow, "fast-path append")
        return written

    def _append(
        self,
        conn: Connection,
        key: str,
        batch: list[Event],
        expected: int | None,
        *,
        in_order: bool = False,
        masked: dict[str, tuple[Masked, ...]] | None = None,
    ) -> tuple[AppendResult, Tail | None]:
        """The ordinary path in ``conn``'s transaction; with ``in_order``, it raises
        ``rows.Overtaken`` where its events would reach the feed before earlier ones."""
        from viewstore.domain.events import Role, parse_event  # noqa: PLC0415 - start-up time
        from viewstore.store.append import rows  # noqa: PLC0415 - start-up time

        now = datetime.now(UTC)
        row, maybe_stored = rows.lock_for_append(conn, key, [e.id for e in batch])
        if row is None and not batch:
            return AppendResult(conversation_id=key, version=0), None
        if row is None:
            erasure.refuse_if_erased(conn, key)
        if row is None and not expected:
            # Create the row (or wait for a racing creator's and lock it) before any check, so
            # the version and dedupe checks below see what a concurrent first append wrote.
            row = rows.create_conversation(conn, key, now)
        version = 0 if row is None else row.version
        tail = None
        if row is not None:
            now = rows.not_before(now, row.updated_at)
            tail = Tail(
                rows.state_from_row(row),
                row.last_hash,
                row.updated_at,
                prefix=tuple(lineage.segments(conn, row)[:-1]),
            )
        if expected is not None and expected != version:
            retry = self._as_retry(conn, key, batch, row=row, expected=expected, version=version)
            if retry is not None:
                return retry, tail
            logger.info("conflict on %r: expected version %d, found %d", key, expected, version)
            raise ConcurrencyError(key, expected, version)
        # The lock's check sees a fork's own events only, not the prefix it shares.
        maybe_stored = maybe_stored or (tail is not None and bool(tail.prefix))
        stored = rows.stored_payloads(conn, row, [e.id for e in batch]) if maybe_stored else {}
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
        self._insert_log(conn, log, masked, in_order=in_order)
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
        return result, Tail(projection.state, last_hash, now, prefix=tail.prefix)

    def _insert_log(
        self,
        conn: Connection,
        log: list[dict[str, Any]],
        masked: dict[str, tuple[Masked, ...]] | None,
        *,
        in_order: bool,
    ) -> None:
        """The log rows, and the records of the events masking changed."""
        from viewstore.store.append import masks, rows  # noqa: PLC0415 - start-up time

        rows.insert_events(conn, log, in_order=in_order)
        if masked:
            masks.insert_rows(conn, masks.rows(log, masked, self._chain_key))

    def _as_retry(
        self,
        conn: Connection,
        key: str,
        batch: list[Event],
        *,
        row: Any,
        expected: int,
        version: int,
    ) -> AppendResult | None:
        """An exact resend of events already stored right after ``expected``: a no-op."""
        from viewstore.domain.events import parse_event  # noqa: PLC0415 - start-up time
        from viewstore.store.append import rows  # noqa: PLC0415 - start-up time

        if not batch or expected + len(batch) > version:
            return None
        stored = rows.payloads_at(conn, row, expected + 1, expected + len(batch))
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
        from viewstore.domain.projector import needs_view, project  # noqa: PLC0415 - start-up time
        from viewstore.store.append import rows  # noqa: PLC0415 - start-up time

        if needs_view(e for _, e in numbered):
            return project(
                state,
                numbered,
                view=rows.load_current_view(conn, key),
                open_indices=rows.load_open_indices(conn, key),
            )
        return project(state, numbered)

    # -- reading ------------------------------------------------------------------------

    def view(self, conversation_id: ConversationId, *, as_of: int | None = None) -> StoredView:
        """The live view from the view rows: now, or right after event ``as_of``."""
        key = conversation_key(conversation_id)
        if as_of is not None:
            check_integer("as_of", as_of)
        with self._read() as conn:
            if as_of is not None:
                self._check_seq(conn, key, as_of)
            return reads.read_view(conn, key, as_of)

    def view_page(
        self,
        conversation_id: ConversationId,
        *,
        as_of: int | None = None,
        first: int | None = None,
        limit: int = 500,
    ) -> ViewPage:
        """A window of the view (now, or right after ``as_of``): at most ``limit`` events from
        position ``first`` (default: the last ``limit``), read without the rest of the view."""
        key = conversation_key(conversation_id)
        for name, value in (("as_of", as_of), ("first", first)):
            if value is not None:
                check_integer(name, value)
        check_integer("limit", limit, minimum=1)
        with self._read() as conn:
            if as_of is None:
                reads.conversation_row(conn, key)
            else:
                self._check_seq(conn, key, as_of)
            length = reads.view_length(conn, key, as_of)
            start = max(0, length - limit) if first is None else first
            if not 0 <= start <= max(0, length - 1):
                raise InvalidArgumentError(
                    f"first must be a position from 0 to {max(0, length - 1)} of a view of "
                    f"{length} events, got {start}"
                )
            return ViewPage(reads.read_view(conn, key, as_of, start, limit), length, start)

    def in_view(
        self, conversation_id: ConversationId, event_ids: Iterable[str], *, as_of: int | None = None
    ) -> set[str]:
        """Which of ``event_ids`` the view holds, now or right after ``as_of``."""
        key = conversation_key(conversation_id)
        ids = list(dict.fromkeys(str(event_id) for event_id in event_ids))
        if as_of is not None:
            check_integer("as_of", as_of)
        with self._read() as conn:
            if as_of is None:
                reads.conversation_row(conn, key)
            else:
                self._check_seq(conn, key, as_of)
            return reads.in_view(conn, key, ids, as_of)

    def events(
        self, conversation_id: ConversationId, *, after: int = 0, limit: int | None = None
    ) -> list[StoredEvent]:
        key = conversation_key(conversation_id)
        if limit is not None:
            check_integer("limit", limit)
        check_integer("after", after)
        with self._read() as conn:
            return reads.read_events(conn, key, after=after, limit=limit)

    def version(self, conversation_id: ConversationId) -> int:
        key = conversation_key(conversation_id)
        with self._read() as conn:
            value: int = reads.conversation_row(conn, key).version
            return value

    def feed(self, after: str | None = None, limit: int = 1000) -> list[FeedEntry]:
        """Events of all conversations in commit order, after the cursor ``after``.

        Store the last entry's ``cursor`` and pass it as ``after`` next time: no event is ever
        skipped or repeated (see ``viewstore.store.feed.feed``). Fewer than ``limit`` entries (even
        none) does not mean the end: more may commit later.
        """
        check_feed_limit(limit)
        with self._read() as conn:
            if self._layout.sharded(conn):  # Citus: one feed per node (shard_feed)
                return self._layout.node_feeds(conn, after, limit)
            if after is not None:
                decode_feed_cursor(after)
            return read_feed(conn, after, limit)

    def follow(
        self, after: str | None = None, *, poll: float = DEFAULT_POLL, limit: int = DEFAULT_LIMIT
    ) -> Generator[FeedEntry]:
        """The change feed after ``after``, as it commits: a blocking iterator that never ends
        by itself (stop iterating, or ``close()`` it, to end it).

        On PostgreSQL each commit that appends events wakes it (``LISTEN`` on a connection
        of its own, docs/schema.md), and it reads again at least every ``poll`` seconds
        anyway; on SQLite (and on a Citus cluster) it polls, from 50 ms up to ``poll``. It
        yields what ``feed()`` would, each entry once, and after a dropped connection it
        reconnects and goes on from the last entry it yielded (``viewstore.store.feed.follow``).
        ``limit``: entries per read.
        """
        return follow(self.feed, self._follow_target, after=after, poll=poll, limit=limit)

    def feed_tail(self) -> str | None:
        """The cursor of the newest entry ``feed()`` shows now (None: it shows nothing yet):
        ``follow(store.feed_tail())`` yields only what commits later
        (``viewstore.store.feed.feed_tail``). Not on a store distributed by Citus."""
        with self._read() as conn:
            if self._layout.sharded(conn):
                raise UnsupportedDatabaseError(
                    "feed_tail() is not available on a distributed store: follow from a "
                    "cursor you kept instead"
                )
            return tail_cursor(conn)

    def _follow_target(self) -> ListenTarget | None:
        """Where commits notify a follower (None: nowhere, poll); for ``follow`` and the
        async follower (``viewstore.store.feed.follow_async``)."""
        with self._read() as conn:
            if self._layout.sharded(conn):  # Citus: no notifications (docs/schema.md)
                return None
            return listen_target(conn)
