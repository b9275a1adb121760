"""The read-decide-append loop, written once: :func:`append_with_retry`."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from viewstore.errors import ConcurrencyError, ConversationNotFoundError, InvalidArgumentError
from viewstore.store.inputs import EventInput, conversation_key
from viewstore.store.records import AppendResult, StoredView

if TYPE_CHECKING:
    from viewstore.store.event_store import EventStore

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
) -> AppendResult:
    """Read the view, let ``decide`` choose events, append them conditionally; retry on conflict.

    Each attempt:

    1. reads the conversation's current view (``store.view``); a conversation that does not
       exist yet is passed as ``None`` and counts as version 0;
    2. calls ``decide(view_or_None)``, which returns the events to append (anything
       ``store.append`` accepts), or ``None`` / an empty list to append nothing;
    3. appends them with ``expected_version`` = the version that was read, so the append only
       goes through if nobody else appended in between.

    On :class:`~viewstore.errors.ConcurrencyError` the loop sleeps a random time in
    ``[0, min(max_backoff, backoff * 2**n))`` (full jitter, ``n`` = attempts so far), calls
    ``on_conflict(error, n)`` if given (for metrics), and starts over with a fresh read, so
    ``decide`` always sees the state it is deciding on. ``decide`` may be called several times
    and must not have side effects that matter beyond its return value. After ``attempts``
    conflicts the last ``ConcurrencyError`` is raised. Every other error (bad input, a
    duplicate id, storage) is raised at once: retrying cannot fix it.

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
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise InvalidArgumentError(f"attempts must be a positive integer, got {attempts!r}")
    if backoff < 0 or max_backoff < 0:
        raise InvalidArgumentError("backoff and max_backoff must not be negative")
    key = conversation_key(conversation_id)
    for attempt in range(attempts):
        try:
            view: StoredView | None = store.view(key)
        except ConversationNotFoundError:
            view = None
        version = 0 if view is None else view.version
        decision = decide(view)
        events = _as_list(decision)
        if not events:
            return AppendResult(conversation_id=key, version=version)
        try:
            return store.append(key, events, expected_version=version)
        except ConcurrencyError as error:
            if attempt + 1 >= attempts:
                raise
            if on_conflict is not None:
                on_conflict(error, attempt + 1)
            time.sleep(random.uniform(0, min(max_backoff, backoff * 2**attempt)))
    raise AssertionError("unreachable")  # pragma: no cover


def _as_list(decision: Decision) -> list[EventInput]:
    if decision is None:
        return []
    if isinstance(decision, BaseModel | dict | str | bytes | bytearray):  # Event included
        return [decision]
    return list(decision)


__all__ = ["append_with_retry"]
