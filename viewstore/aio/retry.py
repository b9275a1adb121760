"""``viewstore.append_with_retry`` for an ``AsyncEventStore``: the same loop, awaited."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from viewstore import retry
from viewstore.domain.errors import ConcurrencyError, TransientStorageError
from viewstore.store import AppendResult, StoredView

if TYPE_CHECKING:
    from viewstore.aio.store import AsyncEventStore


async def append_with_retry(
    store: AsyncEventStore,
    conversation_id: str | uuid.UUID,
    decide: Callable[[StoredView | None], retry.Decision],
    *,
    attempts: int = retry.DEFAULT_ATTEMPTS,
    backoff: float = retry.DEFAULT_BACKOFF,
    max_backoff: float = retry.DEFAULT_MAX_BACKOFF,
    on_conflict: Callable[[ConcurrencyError, int], None] | None = None,
    on_transient: Callable[[TransientStorageError, int], None] | None = None,
) -> AppendResult:
    """``viewstore.append_with_retry`` (read, ``decide``, append conditionally, retry on
    conflicts and transient failures), run where the store runs its methods: the backoff
    waits on the event loop. ``decide`` and the callbacks are plain functions: they run in
    that loop too, between two database calls, and must not block."""
    return await store.run_sync(
        retry.append_with_retry,
        conversation_id,
        decide,
        attempts=attempts,
        backoff=backoff,
        max_backoff=max_backoff,
        on_conflict=on_conflict,
        on_transient=on_transient,
    )
