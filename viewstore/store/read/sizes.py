"""The catalogue's orders by size, kept out of the append's way (``catalogue_sizes``).

An append rewrites its conversation's row and moves it in the ``updated_at`` index, and no
other index of that row: the orders by ``version`` and ``view_length`` are indexes of
``catalogue_sizes``, a copy of each conversation's two figures with the ``updated_at`` they
were copied at (docs/schema.md). A conversation's copy is inserted with it; an append leaves it
as it is.

A conversation has **changed** when it was updated at or after ``since`` (the newest copy's
time less ``MARGIN``) and its copy is not of its present row. Changed conversations are found
from the ``updated_at`` index, a range as long as the activity since the last refresh. A page
in a size order merges the copies of the conversations that have not changed with the present
figures of those that have (``viewstore.store.read.catalogue``): each conversation is in
exactly one of the two, so the page is exact however old the copies are. What the copies' age
costs is the length of that range, so a reader that may write brings them up to date
(``refresh``) once more than ``REFRESH_AT`` conversations have changed; a read-only reader (the
viewer) relies on the writers' reads and sweeps (``EventStore.refresh_catalogue_sizes``).

Why ``MARGIN``: an append reads its clock before it takes its conversation's lock, and writers'
clocks differ, so an append can commit after a newer one was copied yet carry an older time.
Every read looks again at the conversations updated up to ``MARGIN`` before the newest copy,
so an append that commits up to that late (or from a clock up to that far behind) is still
seen. A later one (an application that held its transaction open longer) is seen at its
conversation's next append or at a full refresh (``refresh(..., full=True)``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    bindparam,
    false,
    func,
    not_,
    or_,
    select,
    text,
    tuple_,
    update,
)

from viewstore.store.database.schema import catalogue_sizes, conversations
from viewstore.store.read.reads import aware, comparable

MARGIN = timedelta(seconds=10)
#: A reader that may write refreshes the copies first once more conversations than this have
#: changed: the merge then reads at most this many rows beyond its page, and a list read
#: writes only after this many appends to other conversations.
REFRESH_AT = 256
#: Copies refreshed per statement (and per transaction, by ``EventStore``).
REFRESH_BATCH = 500
#: The two orders served by ``catalogue_sizes``.
SIZE_ORDERS = ("version", "view_length")


def created(conn: Connection, conversation_id: str, version: int, view_length: int) -> None:
    """The copy of a conversation just inserted, in the same transaction (never refreshed)."""
    values = {
        "conversation_id": conversation_id,
        "updated_at": None,
        "version": version,
        "view_length": view_length,
    }
    conn.execute(catalogue_sizes.insert().values(values))


def recopied(
    conn: Connection, conversation_id: str, version: int, view_length: int, updated_at: Any
) -> None:
    """The copy of a conversation whose figures were rewritten without a new ``updated_at``
    (a rebuild): no range of times would find the change, so its copy is rewritten with it."""
    s = catalogue_sizes.c
    values = {"updated_at": updated_at, "version": version, "view_length": view_length}
    conn.execute(update(catalogue_sizes).where(s.conversation_id == conversation_id).values(values))


def since(conn: Connection) -> datetime | None:
    """The time from which changed conversations are looked for: None while no copy was ever
    refreshed (then every conversation is looked at). One descent of the copies' time index."""
    newest = conn.execute(select(func.max(catalogue_sizes.c.updated_at))).scalar()
    if newest is None:
        return None
    if isinstance(newest, str):  # SQLite hands back the stored text of a max()
        newest = datetime.fromisoformat(newest)
    return comparable(conn, aware(newest) - MARGIN)


def current(copy: Any = catalogue_sizes) -> Any:
    """Whether ``copy`` (a ``catalogue_sizes`` row joined to its conversation's) is of the
    conversation's present row. Never NULL: a copy never refreshed is not."""
    c, s = conversations.c, copy.c
    return and_(
        s.updated_at.is_not(None),
        s.updated_at == c.updated_at,
        s.version == c.version,
        s.view_length == c.view_length,
    )


def unchanged(start: datetime | None, copy: Any = catalogue_sizes) -> Any:
    """The conversations whose joined ``copy`` serves their place in a size order."""
    if start is None:
        return current(copy)
    return or_(conversations.c.updated_at < start, current(copy))


def changed(start: datetime | None) -> Any:
    """The conversations that have changed, exactly those not ``unchanged``: on a query of
    ``conversations`` alone, the copy is looked up row by row (a correlated subquery, which
    neither backend turns into a join: a join of the range to every copy was planned as a
    hash join reading them all where there were no statistics)."""
    copy = catalogue_sizes.alias("copy")
    looked_up = (
        select(current(copy)).where(copy.c.conversation_id == conversations.c.id).scalar_subquery()
    )
    fresh = func.coalesce(looked_up, false())
    if start is None:
        return not_(fresh)
    return and_(conversations.c.updated_at >= start, not_(fresh))


#: Where a full refresh has got to: the last (updated_at, id) it looked at.
Place = tuple[Any, str]


def _changed_rows(
    conn: Connection, limit: int, full: bool, after: Place | None, start: datetime | None = None
) -> list[Any]:
    """Up to ``limit`` conversations, oldest update first: with ``full``, every one after
    ``after`` (each with whether it is ``stale``); else those changed since ``start`` (None:
    since ``since(conn)``)."""
    c = conversations.c
    query = select(c.id, c.updated_at, c.version, c.view_length)
    query = query.order_by(c.updated_at, c.id).limit(limit)
    if full:
        # Every row, in keyset rounds of the updated_at index: the ones already current are
        # read and passed over, so a full refresh reads the catalogue once.
        query = query.add_columns(changed(None).label("stale"))
        if after is not None:
            query = query.where(tuple_(c.updated_at, c.id) > after)
    else:
        query = query.where(changed(since(conn) if start is None else start))
    return list(conn.execute(query))


def behind(conn: Connection) -> bool:
    """Whether more than ``REFRESH_AT`` conversations have changed since their copies, or no
    copy was ever refreshed (then every conversation counts as changed)."""
    start = since(conn)
    if start is None:
        return conn.execute(select(conversations.c.id).limit(1)).first() is not None
    return len(_changed_rows(conn, REFRESH_AT + 1, False, None, start)) > REFRESH_AT


def may_refresh(conn: Connection) -> bool:
    """Whether this connection may write the copies: not the viewer's read-only sessions
    (docs/howto-viewer.md), not a role without the privilege (the database's reader role)."""
    if conn.dialect.name == "sqlite":
        return not conn.exec_driver_sql("PRAGMA query_only").scalar()
    found = conn.execute(
        text(
            "SELECT current_setting('transaction_read_only') = 'off' "
            "AND has_table_privilege(CAST(:t AS regclass), 'UPDATE')"
        ),
        {"t": "catalogue_sizes"},
    ).scalar()
    return bool(found)


def refresh(
    conn: Connection, *, full: bool = False, after: Place | None = None, limit: int = REFRESH_BATCH
) -> tuple[int, Place | None]:
    """Bring up to ``limit`` changed conversations' copies up to date, oldest change first:
    how many were refreshed, and where a full refresh goes on from (None: it is done; the
    refresh that is not full goes on from wherever the copies then are, so call it until it
    refreshes none). ``full``: look at every conversation after ``after``, not only those
    updated since the newest copy's time less ``MARGIN``. A copy only moves forward: a
    refresher that read a row before another refreshed it from a newer one leaves the newer
    copy."""
    found = _changed_rows(conn, limit, full, after)
    place = (found[-1].updated_at, found[-1].id) if full and len(found) == limit else None
    rows = [row for row in found if not full or row.stale]
    if not rows:
        return 0, place
    s = catalogue_sizes.c
    statement = (
        update(catalogue_sizes)
        .where(s.conversation_id == bindparam("b_id"))
        .where(s.updated_at.is_(None) | (s.updated_at <= bindparam("b_updated_at")))
        .values(
            updated_at=bindparam("b_updated_at"),
            version=bindparam("b_version"),
            view_length=bindparam("b_view_length"),
        )
    )
    conn.execute(
        statement,
        [
            {
                "b_id": row.id,
                "b_updated_at": row.updated_at,
                "b_version": row.version,
                "b_view_length": row.view_length,
            }
            # In key order: two refreshers that read a conversation before and after an
            # append sort it differently by time, and would lock in opposite orders.
            for row in sorted(rows, key=lambda row: str(row.id))
        ],
    )
    return len(rows), place
