"""``viewstore sync``: every conversation of one agent server, pulled to the end of its log.

Each conversation is one ``pull`` (``viewstore.ingest.pull``) from its last stored event, so a
sync stopped half-way continues where it was on the next run, and a sync running beside the
ingest (or another sync) only ever appends what is missing, in order, once.
"""

from __future__ import annotations

from collections.abc import Iterator

from viewstore.ingest import info
from viewstore.ingest.agent_server import AgentServerClient
from viewstore.ingest.pull import PullResult, pull
from viewstore.ingest.sources import Source
from viewstore.store import EventStore


def sync_source(store: EventStore, source: Source) -> Iterator[PullResult]:
    """Pull each of the server's conversations (its info first), yielding what was done."""
    client = AgentServerClient(source)
    page_id: str | None = None
    while True:
        items, page_id = client.conversations(page_id=page_id)
        for item in items:
            record = info.from_webhook(item)
            info.save(store, record, source.name)
            yield pull(store, client, record.conversation_id, None)
        if page_id is None:
            return
