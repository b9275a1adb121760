"""The conversation catalogue: one record per conversation, from its row alone.

Everything a list of conversations shows is kept on the ``conversations`` row by every append
(version, view length, request flag, times); the last event's kind is one primary-key lookup
in the log (its seq is the version). Listing a store therefore never reads a view or scans a
log, whatever the conversations' sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, and_, func, select

from viewstore.errors import InvalidArgumentError
from viewstore.store.reads import aware, comparable
from viewstore.store.schema import conversations, events

Order = Literal["id", "created_at", "updated_at", "version", "view_length"]
ORDERS: tuple[Order, ...] = ("id", "created_at", "updated_at", "version", "view_length")
MAX_LIMIT = 100_000


@dataclass(frozen=True)
class ConversationInfo:
    """One conversation in the catalogue (``store.conversations()``).

    ``id``: the conversation id; ``created_at`` / ``updated_at``: when its first and its last
    append committed (UTC); ``version``: how many events it has; ``view_length``: how many
    events its live view holds now; ``unhandled_condensation_request``: whether a condensation
    request waits for its condensation; ``last_event_kind``: the ``kind`` of its last event.
    """

    id: str
    created_at: datetime
    updated_at: datetime
    version: int
    view_length: int
    unhandled_condensation_request: bool
    last_event_kind: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the same keys, times as ISO 8601 text."""
        return {
            "id": self.id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "version": self.version,
            "view_length": self.view_length,
            "unhandled_condensation_request": self.unhandled_condensation_request,
            "last_event_kind": self.last_event_kind,
        }


def check_options(
    *,
    search: str = "",
    order_by: str = "id",
    limit: int | None = None,
    offset: int = 0,
    updated_since: datetime | None = None,
    min_view_length: int | None = None,
) -> None:
    if not isinstance(search, str):
        raise InvalidArgumentError(f"search must be text, got {search!r}")
    if order_by not in ORDERS:
        raise InvalidArgumentError(f"order_by must be one of {', '.join(ORDERS)}, got {order_by!r}")
    for name, value in (("offset", offset), ("min_view_length", min_view_length)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(f"{name} must be a non-negative integer, got {value!r}")
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT
    ):
        raise InvalidArgumentError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    if updated_since is not None and (
        not isinstance(updated_since, datetime) or updated_since.tzinfo is None
    ):
        raise InvalidArgumentError(
            f"updated_since must be a timezone-aware datetime, got {updated_since!r}"
        )


def _filtered(
    conn: Connection,
    query: Any,  # a Select of any columns (SQLAlchemy's generic Select defeats a TypeVar)
    search: str,
    updated_since: datetime | None,
    min_view_length: int | None,
) -> Any:
    c = conversations
    if search:
        query = query.where(c.c.id.contains(search, autoescape=True))
    if updated_since is not None:
        query = query.where(c.c.updated_at >= comparable(conn, updated_since))
    if min_view_length is not None:
        query = query.where(c.c.view_length >= min_view_length)
    return query


def count_catalogue(
    conn: Connection,
    *,
    search: str = "",
    updated_since: datetime | None = None,
    min_view_length: int | None = None,
) -> int:
    query = select(func.count()).select_from(conversations)
    total = conn.execute(_filtered(conn, query, search, updated_since, min_view_length)).scalar()
    return int(total or 0)


def read_catalogue(
    conn: Connection,
    *,
    search: str = "",
    order_by: Order = "id",
    descending: bool = False,
    limit: int | None = None,
    offset: int = 0,
    updated_since: datetime | None = None,
    min_view_length: int | None = None,
) -> list[ConversationInfo]:
    c = conversations
    query = select(
        c.c.id,
        c.c.created_at,
        c.c.updated_at,
        c.c.version,
        c.c.view_length,
        c.c.unhandled_request,
        events.c.kind,
    ).outerjoin(events, and_(events.c.conversation_id == c.c.id, events.c.seq == c.c.version))
    query = _filtered(conn, query, search, updated_since, min_view_length)
    column = c.c[order_by]
    if descending:
        query = query.order_by(column.desc(), c.c.id.desc())
    else:
        query = query.order_by(column, c.c.id)
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    return [
        ConversationInfo(
            id=row.id,
            created_at=aware(row.created_at),
            updated_at=aware(row.updated_at),
            version=row.version,
            view_length=row.view_length,
            unhandled_condensation_request=bool(row.unhandled_request),
            last_event_kind=row.kind,
        )
        for row in conn.execute(query)
    ]
