"""The SQL store: schema, engines per dialect, and the EventStore that owns every transaction."""

from viewstore.store.event_store import EventStore
from viewstore.store.read.catalogue import ConversationInfo, ConversationPage
from viewstore.store.records import (
    AppendResult,
    CondensationRecord,
    ConversationReport,
    ForkOrigin,
    Redaction,
    StoredEvent,
    StoredView,
    Tombstone,
    VerifyReport,
    ViewPage,
)

__all__ = [
    "AppendResult",
    "CondensationRecord",
    "ConversationInfo",
    "ConversationPage",
    "ConversationReport",
    "EventStore",
    "ForkOrigin",
    "Redaction",
    "StoredEvent",
    "StoredView",
    "Tombstone",
    "VerifyReport",
    "ViewPage",
]
