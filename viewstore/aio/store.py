"""``AsyncEventStore``: the ``EventStore`` for asyncio programs, a thin shell over it.

SQLAlchemy's asyncio layer drives an asyncio driver (aiosqlite, psycopg's ``AsyncConnection``)
through an ordinary ``Engine``, its ``AsyncEngine.sync_engine``, from blocking-style code that
runs in a greenlet: each time that code waits for the driver, the greenlet hands the wait to
the event loop, and the loop runs other tasks meanwhile. ``AsyncEventStore`` keeps an
``EventStore`` on that engine and runs each of its methods that way (``greenlet_spawn``). So
both stores run one definition of every statement, plan, check, retry and error translation:
the append's fast path and its server-side call, the locked ordinary path, the reads, the
audits. Only the waiting differs (viewstore/store/pausing.py).

Cancellation never reaches that blocking code: each call runs in a task of its own, which a
cancelled caller leaves running to its end (viewstore/aio/calls.py, docs/asyncio.md). So do
the appends inside a ``begin()`` block: a block whose task is cancelled lets them end, then
rolls its transaction back whole. (Cut inside a statement, SQLAlchemy invalidated the block's
connection and closed it with the statement unfinished; SQLite kept such a connection, and the
write lock of its open transaction, until the statement was freed, and every writer after it
waited its busy timeout and failed.) Only the statements of the caller's own transaction
(``connection=`` an ``AsyncConnection`` or ``AsyncSession`` not from ``begin()``) run in the
caller's task: that transaction is the caller's to end.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterable
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    nullcontext,
)
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session
from sqlalchemy.util.concurrency import greenlet_spawn

from viewstore.aio.calls import Calls

if TYPE_CHECKING:
    from viewstore.domain.masking import MaskingRules
from viewstore.aio.engine import create_async_engine
from viewstore.store import (
    DEFAULT_LIMIT,
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_POLL,
    AppendResult,
    ConversationId,
    EventInput,
    EventStore,
    FeedEntry,
    FollowState,
    check_map,
    default_url,
    follow_async,
)

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")
Caller = AsyncConnection | AsyncSession | Connection | Session


def _shell(
    method: Callable[Concatenate[EventStore, _P], _R],
) -> Callable[Concatenate[AsyncEventStore, _P], Coroutine[Any, Any, _R]]:
    """``method`` of ``EventStore``, as a coroutine method running it in a greenlet."""

    @functools.wraps(method)
    async def shell(self: AsyncEventStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        # A partial: greenlet_spawn's own keyword would clash with the method's in the types.
        call = functools.partial(method, self.sync_store, *args, **kwargs)
        return await self._calls.run(greenlet_spawn(call))

    return shell


def _writer(
    method: Callable[Concatenate[EventStore, _P], _R],
) -> Callable[Concatenate[AsyncEventStore, _P], Coroutine[Any, Any, _R]]:
    """``_shell``, for a method that writes: on SQLite it waits its turn (``_turns``)."""

    @functools.wraps(method)
    async def shell(self: AsyncEventStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        call = functools.partial(method, self.sync_store, *args, **kwargs)
        return await self._calls.run(self._in_turn(call))

    return shell


class AsyncEventStore:
    """``EventStore``'s methods, arguments, results and errors, awaited: ``await
    store.append(...)``, ``await store.view(...)``... (see ``EventStore`` for each).

    ``url_or_engine``: a database URL (default: ``VIEWSTORE_URL``, else
    ``sqlite:///viewstore.db``), written for either store: ``sqlite:///f.db`` runs on
    aiosqlite and ``postgresql://`` on psycopg's asyncio connection; or an engine made by
    ``viewstore.aio.create_async_engine``. The other arguments are ``EventStore``'s.
    """

    def __init__(
        self,
        url_or_engine: str | AsyncEngine | None = None,
        *,
        schema: str | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        chain_key: str | bytes | None = None,
        fast_path: bool = True,
        server_append: bool | None = None,
        masking: MaskingRules | str | Path | None = None,
    ) -> None:
        if isinstance(url_or_engine, AsyncEngine):
            self.engine = url_or_engine
            self._owns_engine = False
        else:
            self.engine = create_async_engine(url_or_engine or default_url(), schema=schema)
            self._owns_engine = True
        try:
            #: The blocking store every call runs; usable only inside ``run_sync``.
            self.sync_store = EventStore(
                self.engine.sync_engine,
                schema=schema,
                max_event_bytes=max_event_bytes,
                chain_key=chain_key,
                fast_path=fast_path,
                server_append=server_append,
                masking=masking,
            )
        except BaseException:
            if self._owns_engine:
                self.engine.sync_engine.dispose(close=False)
            raise
        self._writers = asyncio.Lock() if self.engine.dialect.name == "sqlite" else None
        self._calls = Calls()
        # The appends under way inside each open ``begin()`` block, by its connection.
        self._blocks: dict[int, set[asyncio.Task[Any]]] = {}

    def _turns(self) -> AbstractAsyncContextManager[Any]:
        """On SQLite, this store's writers one at a time, in the order they came. SQLite has a
        single write lock, and a writer that finds it taken waits in SQLite's busy handler,
        which sleeps in steps of up to 100 ms: many tasks of one loop appending at once would
        mostly sleep, the lock often free meanwhile (50 appends at once took over a second
        that way). The store's own queue hands the lock on at once. Other processes, and
        ``begin()`` blocks, still meet at SQLite's lock."""
        return self._writers if self._writers is not None else nullcontext()

    async def _in_turn(self, call: Callable[[], _T]) -> _T:
        async with self._turns():
            return await greenlet_spawn(call)

    @property
    def schema(self) -> str | None:
        return self.sync_store.schema

    @property
    def max_event_bytes(self) -> int:
        return self.sync_store.max_event_bytes

    async def run_sync(
        self, fn: Callable[Concatenate[EventStore, _P], _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(sync_store, *args, **kwargs)`` in the greenlet every method runs in: blocking
        code written against ``EventStore`` (``viewstore.append_with_retry``, say), awaited."""
        return await self._calls.run(
            greenlet_spawn(functools.partial(fn, self.sync_store, *args, **kwargs))
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def settle(self) -> None:
        """Wait until the calls under way have ended, those that cancelled callers left
        running included (a cancelled append still ends whole or absent: docs/asyncio.md)."""
        await self._calls.settle()

    async def close(self) -> None:
        """``settle()``, then close the store."""
        await self._calls.settle()
        await greenlet_spawn(self.sync_store.close)
        if self._owns_engine:
            await self.engine.dispose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    create_schema = _writer(EventStore.create_schema)
    schema_revision = _shell(EventStore.schema_revision)
    citus_distribute = _writer(EventStore.citus_distribute)

    # -- writing ------------------------------------------------------------------------

    async def append(
        self,
        conversation_id: ConversationId,
        events: EventInput | Iterable[EventInput],
        *,
        expected_version: int | None = None,
        connection: Caller | None = None,
    ) -> AppendResult:
        """``EventStore.append``; ``connection`` may also be an ``AsyncConnection`` (as
        ``begin()`` yields) or an ``AsyncSession`` of the store's engine."""
        append = functools.partial(
            self.sync_store.append,
            conversation_id,
            events,
            expected_version=expected_version,
            connection=None if connection is None else _blocking(connection),
        )
        if connection is None:
            return await self._calls.run(self._in_turn(append))
        # In the caller's transaction, which has the write lock already (so not in turn).
        block = self._blocks.get(id(_blocking(connection)))
        if block is None:
            return await greenlet_spawn(append)  # the caller's own transaction, in its task
        task = self._calls.start(greenlet_spawn(append))
        block.add(task)
        task.add_done_callback(block.discard)
        return await asyncio.shield(task)

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """``EventStore.begin``: a write transaction, as an ``AsyncConnection`` of the store's
        engine, committed at the end of the block (rolled back on an exception or a
        cancellation); ``await store.append(..., connection=conn)`` inside it."""
        async with self._entered(self.sync_store.begin(), block=True) as conn:
            yield AsyncConnection(self.engine, conn)

    @asynccontextmanager
    async def conversation_lock(
        self, conversation_id: ConversationId, *, timeout: float = 30.0
    ) -> AsyncIterator[None]:
        """``EventStore.conversation_lock``, waited for without blocking the event loop."""
        async with self._entered(
            self.sync_store.conversation_lock(conversation_id, timeout=timeout)
        ):
            yield

    @asynccontextmanager
    async def _entered(
        self, manager: AbstractContextManager[_T], *, block: bool = False
    ) -> AsyncIterator[_T]:
        """A blocking context manager of the store, entered and left in calls of their own
        (``Calls``): a cancellation cuts neither; a caller cancelled while entering leaves the
        manager to be left as soon as it is entered. ``block``: a ``begin()`` block, left only
        once the appends made inside it have ended."""
        entering = self._calls.start(greenlet_spawn(manager.__enter__))
        try:
            value = await asyncio.shield(entering)
        except asyncio.CancelledError as cancelled:
            self._calls.start(_leave_when_entered(entering, manager, cancelled))
            raise
        pending: set[asyncio.Task[Any]] = set()
        if block:
            self._blocks[id(value)] = pending
        try:
            yield value
        except BaseException as error:
            leave = _leave_after(pending, manager, error)
            if not await self._calls.run(leave):
                raise
        else:
            await self._calls.run(_leave_after(pending, manager, None))
        finally:
            self._blocks.pop(id(value), None)

    save_base_state = _writer(EventStore.save_base_state)
    save_conversation_info = _writer(EventStore.save_conversation_info)
    claim_conversation = _writer(EventStore.claim_conversation)
    hand_over = _writer(EventStore.hand_over)
    claim_runner = _writer(EventStore.claim_runner)
    renew_runner = _writer(EventStore.renew_runner)
    release_runner = _writer(EventStore.release_runner)
    save_server_meta = _writer(EventStore.save_server_meta)
    forget_server_conversation = _writer(EventStore.forget_server_conversation)
    fork = _writer(EventStore.fork)
    redact = _writer(EventStore.redact)
    compact = _writer(EventStore.compact)
    apply_retention = _writer(EventStore.apply_retention)
    erase = _writer(EventStore.erase)
    rebuild = _writer(EventStore.rebuild)

    # -- reading ------------------------------------------------------------------------

    view = _shell(EventStore.view)
    view_page = _shell(EventStore.view_page)
    in_view = _shell(EventStore.in_view)
    resume_view = _shell(EventStore.resume_view)
    replay = _shell(EventStore.replay)
    version = _shell(EventStore.version)
    events = _shell(EventStore.events)
    event = _shell(EventStore.event)
    log_index = _shell(EventStore.log_index)
    feed = _shell(EventStore.feed)
    feed_tail = _shell(EventStore.feed_tail)

    def follow(
        self, after: str | None = None, *, poll: float = DEFAULT_POLL, limit: int = DEFAULT_LIMIT
    ) -> AsyncGenerator[FeedEntry]:
        """``EventStore.follow`` as an async iterator (``async for entry in
        store.follow(cursor)``): the same loop and guarantee, waiting on an asyncio
        connection of its own (``viewstore.store.feed.follow_async``). ``aclose()`` it, or
        leave the ``async for``, to close that connection."""
        FollowState(after, poll, limit)  # bad arguments fail here, not at the first entry
        if after is not None:
            check_map(after)
        return self._follow(after, poll, limit)

    async def _follow(
        self, after: str | None, poll: float, limit: int
    ) -> AsyncGenerator[FeedEntry]:
        target = await self._calls.run(greenlet_spawn(self.sync_store._follow_target))
        entries = follow_async(self.feed, target, after=after, poll=poll, limit=limit)
        try:
            async for entry in entries:
                yield entry
        finally:
            await entries.aclose()

    base_state = _shell(EventStore.base_state)
    base_states = _shell(EventStore.base_states)
    last_state_update = _shell(EventStore.last_state_update)
    condensation = _shell(EventStore.condensation)
    condensations = _shell(EventStore.condensations)
    forgotten_by = _shell(EventStore.forgotten_by)
    conversations = _shell(EventStore.conversations)
    conversation_page = _shell(EventStore.conversation_page)
    conversation_count = _shell(EventStore.conversation_count)
    stats = _shell(EventStore.stats)
    conversation_count_estimate = _shell(EventStore.conversation_count_estimate)
    conversation_ids = _shell(EventStore.conversation_ids)
    conversation_info = _shell(EventStore.conversation_info)
    refresh_catalogue_sizes = _shell(EventStore.refresh_catalogue_sizes)
    conversation_owner = _shell(EventStore.conversation_owner)
    check_runner = _shell(EventStore.check_runner)
    server_conversation = _shell(EventStore.server_conversation)
    server_conversations = _shell(EventStore.server_conversations)
    count_server_conversations = _shell(EventStore.count_server_conversations)
    base_state_signature = _shell(EventStore.base_state_signature)
    inactive_conversations = _shell(EventStore.inactive_conversations)
    fork_origin = _shell(EventStore.fork_origin)
    forks = _shell(EventStore.forks)
    redactions = _shell(EventStore.redactions)
    masks = _shell(EventStore.masks)
    search = _shell(EventStore.search)
    tombstone = _shell(EventStore.tombstone)

    # -- auditing -----------------------------------------------------------------------

    verify = _shell(EventStore.verify)
    checkpoint = _shell(EventStore.checkpoint)
    live_equals_resume = _shell(EventStore.live_equals_resume)


async def _leave_after(
    pending: set[asyncio.Task[Any]],
    manager: AbstractContextManager[Any],
    error: BaseException | None,
) -> bool | None:
    """Leave ``manager`` once the calls ``pending`` on its connection have ended (two calls at
    once on one connection would interleave their statements)."""
    while pending:
        await asyncio.wait(set(pending))
    if error is None:
        return await greenlet_spawn(manager.__exit__, None, None, None)
    return await greenlet_spawn(manager.__exit__, type(error), error, error.__traceback__)


async def _leave_when_entered(
    entering: asyncio.Task[Any], manager: AbstractContextManager[Any], error: BaseException
) -> None:
    try:
        await entering
    except BaseException:  # never entered: nothing to leave
        return
    await greenlet_spawn(manager.__exit__, type(error), error, error.__traceback__)


def _blocking(connection: Caller) -> Connection | Session:
    if isinstance(connection, AsyncConnection):
        return connection.sync_connection  # type: ignore[return-value]  # None once closed
    if isinstance(connection, AsyncSession):
        return connection.sync_session
    return connection
