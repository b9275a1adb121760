"""viewstore: event-sourced SQL persistence for OpenHands agent conversations.

Events and condensations go into tables through one repository (:class:`EventStore`); each
conversation's live view and manipulation indices are kept as rows, updated in the same
transaction as every append.
"""

from viewstore.errors import (
    AuthenticationError,
    CheckpointError,
    ConcurrencyError,
    ConversationNotFoundError,
    DatabaseNotFoundError,
    DuplicateEventError,
    InvalidArgumentError,
    InvalidEventError,
    NoManipulationIndexError,
    PayloadTooLargeError,
    SchemaError,
    SchemaMismatchError,
    ServerUnreachableError,
    StorageError,
    TransientStorageError,
    UnsupportedDatabaseError,
    ViewstoreError,
)
from viewstore.events import Event, Role, parse_event
from viewstore.retry import append_with_retry
from viewstore.store import AppendResult, EventStore, StoredEvent, StoredView, VerifyReport
from viewstore.store.feed import FeedEntry
from viewstore.view import ManipulationIndices, View

__all__ = [
    "AppendResult",
    "AuthenticationError",
    "CheckpointError",
    "ConcurrencyError",
    "ConversationNotFoundError",
    "DatabaseNotFoundError",
    "DuplicateEventError",
    "Event",
    "EventStore",
    "FeedEntry",
    "InvalidArgumentError",
    "InvalidEventError",
    "ManipulationIndices",
    "NoManipulationIndexError",
    "PayloadTooLargeError",
    "Role",
    "SchemaError",
    "SchemaMismatchError",
    "ServerUnreachableError",
    "StorageError",
    "StoredEvent",
    "StoredView",
    "TransientStorageError",
    "UnsupportedDatabaseError",
    "VerifyReport",
    "View",
    "ViewstoreError",
    "append_with_retry",
    "parse_event",
]
