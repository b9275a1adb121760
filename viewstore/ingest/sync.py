"""``viewstore sync``: every conversation of one agent server, pulled to the end of its log.

Each conversation is one ``pull`` (``viewstore.ingest.pull``) from its last stored event, so a
sync stopped half-way continues where it was on the next run, and a sync running beside the
ingest (or another sync) only ever appends what is missing, in order, once. A conversation
that is refused (another source's, a log that does not extend the stored one, an erased
one, an agent server that cannot give that conversation's log) is reported and skipped: the
sync goes on with the server's other conversations.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from viewstore.domain.errors import (
    AgentServerError,
    ConversationErasedError,
    ConversationOwnedError,
    DuplicateEventError,
    InvalidArgumentError,
    SourceMismatchError,
)
from viewstore.ingest import info
from viewstore.ingest.agent_server import AgentServerClient
from viewstore.ingest.pull import PullResult, pull
from viewstore.ingest.sources import Source
from viewstore.store import EventStore

#: What refuses one conversation and not the others. A database failure, or a server whose
#: list of conversations cannot be read, ends the sync instead.
_ONE_CONVERSATION = (
    AgentServerError,
    ConversationErasedError,
    ConversationOwnedError,
    DuplicateEventError,
    InvalidArgumentError,
    SourceMismatchError,
)


@dataclass(frozen=True)
class Synced:
    """One conversation of the sync: what its pull did, or why it was refused."""

    conversation_id: str
    result: PullResult | None
    refused: str | None = None


def sync_source(store: EventStore, source: Source) -> Iterator[Synced]:
    """Pull each of the server's conversations (its info first), yielding what was done."""
    client = AgentServerClient(source)
    page_id: str | None = None
    while True:
        items, page_id = client.conversations(page_id=page_id)
        for item in items:
            yield _one(store, client, item)
        if page_id is None:
            return


def _one(store: EventStore, client: AgentServerClient, item: object) -> Synced:
    key = str(item.get("id")) if isinstance(item, dict) else "?"
    try:
        record = info.from_webhook(item)
        key = record.conversation_id
        info.save(store, record, client.source.name)
        return Synced(key, pull(store, client, key, None))
    except _ONE_CONVERSATION as error:
        return Synced(key, None, " ".join(str(error).split()))
