"""The read-decide-append loop, written once: :func:`append_with_retry`."""

from __future__ import annotations

import logging
import math
import random
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from viewstore.domain.errors import (
    ConcurrencyError,
    ConversationNotFoundError,
    InvalidArgumentError,
    TransientStorageError,
)
from viewstore.store import (
    AppendResult,
    EventInput,
    StoredView,
    check_integer,
    new_conversation_key,
    pause,
)

if TYPE_CHECKING:
    from viewstore.store import EventStore

log = logging.getLogger("viewstore.retry")
Decision = EventInput | Iterable[EventInput] | None
DEFAULT_ATTEMPTS = 20
DEFAULT_BACKOFF = 0.005
DEFAULT_MAX_BACKOFF = 0.5


def append_with_retry(
    store: EventStore,
    conversation_id: str | uuid.UUID,
    decide: Callable[[StoredView | None], Decision],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff: float = DEFAULT_BACKOFF,
    max_backoff: float = DEFAULT_MAX_BACKOFF,
    on_conflict: Callable[[ConcurrencyError, int], None] | None = None,
    on_transient: Callable[[TransientStorageError, int], None] | None = None,
) -> AppendResult:
    """Read the view, let ``decide`` choose events, append them conditionally; retry on conflict
    and on transient failures.

    Each attempt:

    1. reads the conversation's current view (``store.view``); a conversation that does not
       exist yet is passed as ``None`` and counts as version 0;
    2. calls ``decide(view_or_None)``, which returns the events to append (anything
       ``store.append`` accepts), or ``None`` / an empty list to append nothing;
    3. appends them with ``expected_version`` = the version that was read, so the append only
       goes through if nobody else appended in between.

    On :class:`~viewstore.domain.errors.ConcurrencyError` the loop sleeps a random time in
    ``[0, min(max_backoff, backoff * 2**n))`` (full jitter, ``n`` = attempts so far), calls
    ``on_conflict(error, n)`` if given (for metrics), and starts over with a fresh read, so
    ``decide`` always sees the state it is deciding on. ``decide`` may be called several times
    and must not have side effects that matter beyond its return value.

    On :class:`~viewstore.domain.errors.TransientStorageError` (a lost connection, a server
    restart, a lock wait that timed out...) it sleeps the same way and calls
    ``on_transient(error, n)``. A read that failed is read again. An append that failed is
    sent again *as it was*, same events, same expected version, without calling ``decide``
    again: the failure may have hidden a commit that went through, and a batch already stored
    is then a no-op, so the events are stored once whatever happened (a fresh decision could
    choose new ids and store them twice).

    After ``attempts`` failures in all the last error is raised. Every other error (bad input,
    a duplicate id, a permanent storage failure) is raised at once: retrying cannot fix it.

    Returns the :class:`~viewstore.store.records.AppendResult` of the append that went through;
    when ``decide`` chose nothing, an ``AppendResult`` with nothing appended and the version
    that was read.

    Example::

        def decide(view):
            if view is not None and view.unhandled_condensation_request:
                return [make_condensation(view)]
            return [next_message]

        result = append_with_retry(store, conversation_id, decide)
    """
    check_integer("attempts", attempts, minimum=1)
    for name, value in (("backoff", backoff), ("max_backoff", max_backoff)):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value < math.inf
        ):
            raise InvalidArgumentError(f"{name} must be a finite number >= 0, got {value!r}")
    key = new_conversation_key(conversation_id)
    pending: tuple[int, list[EventInput]] | None = None  # decided; its commit may be in doubt
    for attempt in range(attempts):
        try:
            if pending is None:
                view = _read(store, key)
                version = 0 if view is None else view.version
                events = _as_list(decide(view))
                if not events:
                    return AppendResult(conversation_id=key, version=version)
                pending = (version, events)
            return store.append(key, pending[1], expected_version=pending[0])
        except ConcurrencyError as error:
            pending = None  # decide again on what is stored now
            if attempt + 1 >= attempts:
                raise
            if on_conflict is not None:
                on_conflict(error, attempt + 1)
            log.info("retrying %r after a conflict (attempt %d)", key, attempt + 1)
        except TransientStorageError as error:
            if attempt + 1 >= attempts:
                raise
            if on_transient is not None:
                on_transient(error, attempt + 1)
            log.info("retrying %r after a transient failure (attempt %d): %s", key, attempt + 1,
                     error)  # fmt: skip
        # The exponent is capped: 2**1100 does not fit a float (OverflowError), and
        # max_backoff bounds the wait long before that anyway.
        pause(random.uniform(0, min(max_backoff, backoff * 2 ** min(attempt, 64))))
    raise AssertionError("unreachable")  # pragma: no cover


def _read(store: EventStore, key: str) -> StoredView | None:
    try:
        return store.view(key)
    except ConversationNotFoundError:
        return None


def _as_list(decision: Decision) -> list[EventInput]:
    if decision is None:
        return []
    if isinstance(decision, BaseModel | dict | str | bytes | bytearray):  # Event included
        return [decision]
    return list(decision)


__all__ = ["append_with_retry"]
