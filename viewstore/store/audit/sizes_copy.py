"""The catalogue's copy of a conversation's size (``catalogue_sizes``), checked against its row.

A copy may lag behind its conversation: it holds the figures of the row as it was at the
refresh that copied them, or those it was created with (``updated_at`` NULL). So what can be
checked is what no honest lag produces: a copy missing, or of no conversation; copied at a
time the conversation never had (before its creation, after its last update); the present
time with figures the row does not hold; a version above the row's (versions only grow); a
live view longer than its version (a view holds at most one event per seq:
viewstore/store/read/sizes.py says what each copy serves).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, select

from viewstore.store.database.schema import catalogue_sizes, conversations
from viewstore.store.read.reads import aware


def check(conn: Connection, conv: Row[Any]) -> list[str]:
    copy = conn.execute(
        select(catalogue_sizes).where(catalogue_sizes.c.conversation_id == conv.id)
    ).first()
    if copy is None:
        return ["catalogue_sizes holds no copy of its size (the size orders could not list it)"]
    found = []
    figures = f"version {copy.version}, view length {copy.view_length}"
    if copy.version > conv.version:
        found.append(f"catalogue_sizes copies {figures}: above its version {conv.version}")
    if copy.view_length > copy.version:
        found.append(f"catalogue_sizes copies {figures}: a view longer than its version")
    if copy.updated_at is None:
        return found
    copied, updated = aware(copy.updated_at), aware(conv.updated_at)
    if not aware(conv.created_at) <= copied <= updated:
        found.append(
            f"catalogue_sizes was copied at {copied.isoformat()}, a time the conversation "
            f"never had (created {aware(conv.created_at).isoformat()}, last updated "
            f"{updated.isoformat()})"
        )
    elif copied == updated and (copy.version, copy.view_length) != (
        conv.version,
        conv.view_length,
    ):
        found.append(
            f"catalogue_sizes copies {figures} at the conversation's last update, when it had "
            f"version {conv.version}, view length {conv.view_length}"
        )
    return found


def orphans(conn: Connection) -> list[str]:
    """The conversations ids of copies whose conversation is not there."""
    c, s = conversations.c, catalogue_sizes.c
    query = (
        select(s.conversation_id)
        .select_from(catalogue_sizes.outerjoin(conversations, c.id == s.conversation_id))
        .where(c.id.is_(None))
        .order_by(s.conversation_id)
    )
    return list(conn.execute(query).scalars())
