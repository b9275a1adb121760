"""``EventStore``'s browsing reads: the conversation catalogue, a conversation's
condensations, what forgot an event, one event by id (rows the store keeps; no replay)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from viewstore.store.cursors import EXACT_COUNT_LIMIT, Order
from viewstore.store.inputs import conversation_key
from viewstore.store.read import overview, reads, sizes, stats
from viewstore.store.read.catalogue import (
    CatalogueCount,
    check_options,
    count_catalogue,
    estimate_catalogue,
    read_catalogue,
)
from viewstore.store.records import (
    CondensationRecord,
    ConversationInfo,
    ConversationPage,
    StoredEvent,
    StoreStats,
)
from viewstore.store.store_core import ConversationId, StoreCore


class Browsing(StoreCore):
    #: Whether this store's connections may write the catalogue's size copies (None: not
    #: asked yet; the answer is the server's, the same for every connection of the engine).
    _sizes_writable: bool | None = None

    def stats(self, *, fast: bool = False) -> StoreStats:
        """Store-wide counts in one snapshot: conversations, events, condensations, live view
        sizes and events per kind. The full form reads every row (its cost grows with the
        store, docs/operations.md); ``fast=True`` counts only the three tables, each an
        estimate (PostgreSQL) or an upper bound (SQLite) above 10,000 rows, which
        ``exact`` says, and gives no view sizes or events per kind."""
        with self._read() as conn:
            return stats.fast_stats(conn) if fast else stats.full_stats(conn)

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
        after: str | None = None,
    ) -> list[ConversationInfo]:
        """The catalogue: one :class:`ConversationInfo` per conversation (id, times, version,
        view length, request flag, last event kind), read from the conversation rows alone.

        ``order_by`` one of ``id`` (default), ``created_at``, ``updated_at``, ``version``,
        ``view_length`` (ties in id order; ``descending`` reverses both); ``limit`` and
        ``offset`` page through it; ``updated_since`` (an aware datetime) keeps conversations
        appended to at or after it, ``min_view_length`` those whose live view holds at least
        that many events; ``search`` those whose id contains that text. How many match:
        :meth:`conversation_count`; only the ids: :meth:`conversation_ids`.

        ``after``: a keyset cursor (``ConversationInfo.cursor(order_by, descending)`` of the
        last row of the previous page, or :meth:`conversation_page`'s ``next_cursor``): only
        the rows after it in this order. A deep page costs what the first does, where
        ``offset`` reads every row it skips. ``InvalidArgumentError`` if it is not a cursor
        of this order and direction.
        """
        cursor = check_options(
            search=search,
            order_by=order_by,
            limit=limit,
            offset=offset,
            updated_since=updated_since,
            min_view_length=min_view_length,
            descending=descending,
            after=after,
        )
        if order_by in sizes.SIZE_ORDERS:
            self._catch_up_sizes()
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
                after=cursor,
            )

    def _catch_up_sizes(self) -> None:
        """Refresh the size copies first when many have changed and this store may write
        them (viewstore/store/read/sizes.py): the page is exact either way; this keeps its
        merge short."""
        if self._sizes_writable is False:
            return
        with self._read() as conn:
            if self._sizes_writable is None:
                self._sizes_writable = sizes.may_refresh(conn)
            lagging = self._sizes_writable and sizes.behind(conn)
        if lagging:
            self.refresh_catalogue_sizes()

    def refresh_catalogue_sizes(self, *, full: bool = False) -> int:
        """Bring the catalogue's copies of each conversation's version and view length up to
        date (the orders ``version`` and ``view_length`` read them; docs/schema.md): how
        many were refreshed, in transactions of ``sizes.REFRESH_BATCH``. Listing in those
        orders does it itself on a store that may write, once more than
        ``sizes.REFRESH_AT`` conversations have changed; a read-only store's lists stay
        exact but read every change since the last refresh, so a process that writes calls
        this now and then (``viewstore refresh``). ``full``: look at every
        conversation, not only those appended to since the last refresh (see
        ``sizes.MARGIN`` for the one append that needs it)."""
        total = 0
        after: sizes.Place | None = None
        while True:
            with self._write() as conn:
                done, after = sizes.refresh(conn, full=full, after=after)
            total += done
            if (full and after is None) or (not full and done < sizes.REFRESH_BATCH):
                return total

    def conversation_page(
        self,
        *,
        order_by: Order = "id",
        descending: bool = False,
        limit: int = 50,
        after: str | None = None,
        updated_since: datetime | None = None,
        min_view_length: int | None = None,
        search: str = "",
    ) -> ConversationPage:
        """One page of :meth:`conversations` (same options) and the cursor of the next one:
        ``conversation_page(..., after=page.next_cursor)`` until ``next_cursor`` is None."""
        found = self.conversations(
            order_by=order_by,
            descending=descending,
            limit=limit + 1 if isinstance(limit, int) and not isinstance(limit, bool) else limit,
            after=after,
            updated_since=updated_since,
            min_view_length=min_view_length,
            search=search,
        )
        if len(found) <= limit:
            return ConversationPage(conversations=found, next_cursor=None)
        page = found[:limit]
        return ConversationPage(
            conversations=page, next_cursor=page[-1].cursor(order_by, descending)
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
        check_options(search=search, updated_since=updated_since, min_view_length=min_view_length)
        with self._read() as conn:
            return count_catalogue(
                conn, search=search, updated_since=updated_since, min_view_length=min_view_length
            )

    def conversation_count_estimate(
        self,
        *,
        search: str = "",
        updated_since: datetime | None = None,
        min_view_length: int | None = None,
        exact_up_to: int = EXACT_COUNT_LIMIT,
    ) -> CatalogueCount:
        """How many conversations match, cheaply on a large store (the viewer's header):
        ``CatalogueCount(count, exact)``. On PostgreSQL, where a count reads every matching
        row, the planner's estimate (``exact=False``) when it is above ``exact_up_to``, else
        the count; on SQLite, unfiltered, its largest rowid above ``exact_up_to`` (an upper
        bound, exact until conversations are deleted), and a filtered count otherwise."""
        check_options(search=search, updated_since=updated_since, min_view_length=min_view_length)
        with self._read() as conn:
            return estimate_catalogue(
                conn,
                search=search,
                updated_since=updated_since,
                min_view_length=min_view_length,
                exact_up_to=exact_up_to,
            )

    def condensations(
        self, conversation_id: ConversationId, *, upto: int | None = None
    ) -> list[CondensationRecord]:
        """The conversation's condensations in seq order (those at or before ``upto``)."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            if upto is not None:
                self._check_seq(conn, key, upto)
            return overview.condensation_records(conn, key, upto=upto)

    def condensation(self, conversation_id: ConversationId, seq: int) -> CondensationRecord | None:
        """The condensation at ``seq``, or None if the event there is not one."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            self._check_seq(conn, key, seq)
            found = overview.condensation_records(conn, key, upto=None, seq=seq)
        return found[0] if found else None

    def forgotten_by(
        self, conversation_id: ConversationId, event_ids: Iterable[str], *, upto: int | None = None
    ) -> dict[str, int]:
        """Which of ``event_ids`` a condensation forgot (at or before ``upto``), each with the
        seq of the first condensation that did."""
        key = conversation_key(conversation_id)
        ids = [str(event_id) for event_id in event_ids]
        with self._read() as conn:
            if upto is not None:
                self._check_seq(conn, key, upto)
            return overview.forgotten_by(conn, key, ids, upto=upto) if ids else {}

    def event(self, conversation_id: ConversationId, event_id: str) -> StoredEvent | None:
        """The stored event with this id, or None if the conversation has none."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return overview.event_by_id(conn, key, str(event_id))
