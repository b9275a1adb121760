"""``EventStore.search``: full-text search over every conversation's events (docs/search.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.inputs import check_integer, conversation_key
from viewstore.store.read import lineage, reads
from viewstore.store.records import SearchHit, SearchPage
from viewstore.store.store_core import ConversationId, StoreCore

DEFAULT_LIMIT = 20


class SearchMethods(StoreCore):
    def search(
        self,
        query: str,
        *,
        conversation_id: ConversationId | None = None,
        kinds: Sequence[str] | None = None,
        sources: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        window: str | None = None,
        after: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> SearchPage:
        """The events whose text holds every word of ``query``, best first, a page of at most
        ``limit`` (``after``: the ``next_cursor`` of the page before).

        ``conversation_id``: that conversation's events only (a fork's include the prefix it
        shares). ``kinds``, ``sources``: event kinds, sources. ``since``, ``until``: appended
        at or after, before. ``window``: ``"live"``, events in the live view now (of the
        conversation searched, or store-wide of the one holding each event), or
        ``"forgotten"``, events a condensation took out of it. A redacted, compacted or masked
        string is found by no word it had (docs/search.md)."""
        from viewstore.domain import search as rules  # noqa: PLC0415 - start-up time
        from viewstore.store.read import search as statements  # noqa: PLC0415 - as above

        words = rules.words(query)
        chosen = rules.check_window(window)
        check_integer("limit", limit, minimum=1)
        if limit > statements.MAX_LIMIT:
            raise InvalidArgumentError(f"limit must be at most {statements.MAX_LIMIT}")
        position = None if after is None else statements.decode_cursor(after)
        for name, values in (("kinds", kinds), ("sources", sources)):
            if values is not None and (
                isinstance(values, str) or not all(isinstance(v, str) for v in values)
            ):
                raise InvalidArgumentError(f"{name} must be a list of strings, got {values!r}")
        with self._read() as conn:
            segments = live = None
            if conversation_id is not None:
                key = conversation_key(conversation_id)
                segments = lineage.segments(conn, reads.conversation_row(conn, key))
                live = set(reads.read_view(conn, key, None).event_ids)
            found = statements.search(
                conn,
                words,
                statements.Filters(
                    searched=None if conversation_id is None else key,
                    segments=segments,
                    kinds=None if kinds is None else list(kinds),
                    sources=None if sources is None else list(sources),
                    since=since,
                    until=until,
                    window=chosen,
                    live_ids=None if live is None else sorted(live),
                ),
                position,
                limit + 1,
            )
        hits = [
            SearchHit(
                conversation_id=row.conversation_id,
                seq=int(row.seq),
                event_id=row.event_id,
                kind=row.kind,
                source=row.source,
                timestamp=row.timestamp,
                recorded_at=reads.aware(row.recorded_at),
                rank=float(row.rank),
                snippet=rules.snippet(row.payload, words),
                in_live_view=bool(row.own_live) if live is None else row.event_id in live,
            )
            for row in found[:limit]
        ]
        more = len(found) > limit
        last = hits[-1] if hits and more else None
        cursor = (
            None
            if last is None
            else statements.encode_cursor(
                statements.Position(last.rank, last.conversation_id, last.seq)
            )
        )
        return SearchPage(hits=hits, next_cursor=cursor)
