"""``EventStore``'s methods for what agent servers say about conversations and which server
owns each (viewstore/store/adapters/source_info.py holds their SQL; docs/fleet.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from viewstore.domain.errors import ConversationNotFoundError
from viewstore.store.adapters.source_info import (
    check_info,
    check_source,
    claim,
    load,
    owner_of,
    save,
)
from viewstore.store.append.locking import lock_conversation
from viewstore.store.database import backends
from viewstore.store.database.schema import conversation_sources
from viewstore.store.inputs import conversation_key, new_conversation_key
from viewstore.store.lifecycle.erasure import refuse_if_erased
from viewstore.store.read.reads import comparable
from viewstore.store.records import SourceInfo
from viewstore.store.store_core import ConversationId, StoreCore


class SourceInfoMethods(StoreCore):
    def save_conversation_info(self, info: SourceInfo) -> None:
        """Keep what an agent server says about a conversation (one transaction). A record
        whose ``updated_at`` is older than the stored one's changes nothing. Only the owner's
        record is kept: it claims the conversation as ``claim_conversation`` does, and raises
        ``ConversationOwnedError`` for another source's."""
        key = new_conversation_key(info.conversation_id)
        check_info(info)
        now = datetime.now(UTC)
        with self._write() as conn:
            claim(conn, key, info.source, now)
            save(conn, key, info, now)

    def claim_conversation(self, conversation_id: ConversationId, source: str) -> None:
        """Check that ``source`` owns the conversation, making it the owner if the
        conversation is new (holds no events and has no owner). ``ConversationOwnedError``
        when another source owns it, or when it holds events that no source was claimed for;
        ``ConversationErasedError`` when it was erased. One transaction."""
        key = new_conversation_key(conversation_id)
        check_source(source)
        with self._write() as conn:
            claim(conn, key, source, datetime.now(UTC))

    def conversation_owner(self, conversation_id: ConversationId) -> str | None:
        """The source that owns the conversation (the agent server it is ingested from), or
        None."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return owner_of(conn, key)

    def hand_over(self, conversation_id: ConversationId, source: str) -> str | None:
        """Make ``source`` the conversation's owner, whoever owned it (an operator's move: a
        sandbox replaced, a conversation imported and then run by an agent server). Returns
        the previous owner. The new owner's log must still extend the stored one: the ingest
        checks that on its next pull. ``ConversationNotFoundError`` when the conversation
        holds no events and has no owner (nothing to hand over)."""
        key = conversation_key(conversation_id)
        check_source(source)
        now = datetime.now(UTC)
        with self._write() as conn:
            row = lock_conversation(conn, key)
            refuse_if_erased(conn, key)
            previous = owner_of(conn, key)
            if previous is None and row is None:
                raise ConversationNotFoundError(key)
            statement = (
                backends.of(conn)
                .insert(conversation_sources)
                .values(conversation_id=key, source=source, recorded_at=comparable(conn, now))
            )
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=[conversation_sources.c.conversation_id],
                    set_={"source": source, "recorded_at": statement.excluded.recorded_at},
                )
            )
            return previous

    def conversation_info(self, conversation_id: ConversationId) -> SourceInfo | None:
        """What the conversation's agent server last said about it, or None."""
        key = conversation_key(conversation_id)
        with self._read() as conn:
            return load(conn, key)
