"""The tail the store keeps of each conversation it appended to last: what the fast path
(``fast_path``) needs to write the next events with no reads. Apart from the append machinery,
so that opening a store to read imports none of it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from threading import Lock
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from viewstore.domain.projector import ProjectionState
    from viewstore.store.read.lineage import Segment

#: How many conversations' tails one store remembers (a worker usually appends to a few).
TAIL_LIMIT = 4096


@dataclass(frozen=True)
class Tail:
    """What the next append to a conversation needs from the last one."""

    state: ProjectionState
    last_hash: str
    recorded_at: datetime | None = None  # of the last append (see rows.not_before)
    # A fork's shared prefix (its sources' parts of its lineage). This path tells a stored id
    # by the log's unique key, which does not cover them: the store first asks them, which
    # can be done outside the write, as a prefix never changes.
    prefix: tuple[Segment, ...] = ()


class Tails:
    """The tails of the conversations this store committed to last, least recent dropped first.

    A tail is only a hint: the compare-and-set in every fast write checks it against the row.
    """

    def __init__(self, limit: int = TAIL_LIMIT) -> None:
        self._limit = limit
        self._tails: OrderedDict[str, Tail] = OrderedDict()
        self._lock = Lock()

    def get(self, key: str) -> Tail | None:
        with self._lock:
            return self._tails.get(key)

    def put(self, key: str, tail: Tail) -> None:
        with self._lock:
            self._tails[key] = tail
            self._tails.move_to_end(key)
            while len(self._tails) > self._limit:
                self._tails.popitem(last=False)

    def drop(self, key: str) -> None:
        with self._lock:
            self._tails.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._tails.clear()
