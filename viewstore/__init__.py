"""viewstore: event-sourced SQL persistence for OpenHands agent conversations.

Events and condensations go into tables through one repository (:class:`EventStore`); each
conversation's live view and manipulation indices are kept as rows, updated in the same
transaction as every append.

The names below are imported on first use (PEP 562): ``import viewstore`` and the command
line's start-up then cost no SQLAlchemy, pydantic or Alembic import until a store is used.
Logging goes to the ``viewstore`` logger and its children, silent unless the application
configures logging (docs/operations.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from viewstore.store.lazy import lazy_names

__version__ = "0.1.0"  # kept equal to pyproject.toml by tests/test_habits.py

logging.getLogger("viewstore").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from viewstore.aio import AsyncEventStore
    from viewstore.domain.errors import (
        AuthenticationError,
        ChainMismatchError,
        CheckpointError,
        CompactedHistoryError,
        ConcurrencyError,
        ConversationErasedError,
        ConversationExistsError,
        ConversationHasForksError,
        ConversationNotFoundError,
        ConversationOwnedError,
        DamagedBaseStateError,
        DatabaseNotFoundError,
        DuplicateEventError,
        InvalidArgumentError,
        InvalidEventError,
        MissingExtraError,
        NoManipulationIndexError,
        PayloadTooLargeError,
        RunnerHeldError,
        RunnerLostError,
        SchemaError,
        SchemaMismatchError,
        ServerUnreachableError,
        StorageError,
        TransientStorageError,
        UnredactablePathError,
        UnsupportedDatabaseError,
        ViewstoreError,
    )
    from viewstore.domain.events import Event, Role, parse_event
    from viewstore.domain.masking import MaskingRules
    from viewstore.domain.view import ManipulationIndices, View
    from viewstore.retry import append_with_retry
    from viewstore.store import (
        AppendResult,
        CompactionReport,
        ConversationInfo,
        ConversationPage,
        EventStore,
        FeedEntry,
        ForkOrigin,
        MaskRecord,
        Redaction,
        RetentionPolicy,
        RetentionReport,
        SearchHit,
        SearchPage,
        StoredEvent,
        StoredView,
        Tombstone,
        VerifyReport,
        ViewPage,
    )
    from viewstore.store import create_engine_for as create_engine

_ERRORS = "viewstore.domain.errors"
_STORE = "viewstore.store"
#: Each public name, and the module it comes from (``create_engine`` is renamed).
_WHERE = {
    "AppendResult": _STORE,
    "AsyncEventStore": "viewstore.aio",
    "AuthenticationError": _ERRORS,
    "CheckpointError": _ERRORS,
    "CompactionReport": _STORE,
    "ChainMismatchError": _ERRORS,
    "CompactedHistoryError": _ERRORS,
    "ConcurrencyError": _ERRORS,
    "ConversationOwnedError": _ERRORS,
    "RunnerHeldError": _ERRORS,
    "RunnerLostError": _ERRORS,
    "ConversationInfo": _STORE,
    "ConversationPage": _STORE,
    "ConversationErasedError": _ERRORS,
    "ConversationExistsError": _ERRORS,
    "ConversationHasForksError": _ERRORS,
    "ConversationNotFoundError": _ERRORS,
    "DamagedBaseStateError": _ERRORS,
    "DatabaseNotFoundError": _ERRORS,
    "DuplicateEventError": _ERRORS,
    "Event": "viewstore.domain.events",
    "EventStore": _STORE,
    "FeedEntry": _STORE,
    "InvalidArgumentError": _ERRORS,
    "InvalidEventError": _ERRORS,
    "ManipulationIndices": "viewstore.domain.view",
    "MaskingRules": "viewstore.domain.masking",
    "MaskRecord": _STORE,
    "MissingExtraError": _ERRORS,
    "NoManipulationIndexError": _ERRORS,
    "PayloadTooLargeError": _ERRORS,
    "Role": "viewstore.domain.events",
    "SchemaError": _ERRORS,
    "SchemaMismatchError": _ERRORS,
    "ServerUnreachableError": _ERRORS,
    "StorageError": _ERRORS,
    "StoredEvent": _STORE,
    "StoredView": _STORE,
    "ForkOrigin": _STORE,
    "Redaction": _STORE,
    "RetentionPolicy": _STORE,
    "RetentionReport": _STORE,
    "SearchHit": _STORE,
    "SearchPage": _STORE,
    "Tombstone": _STORE,
    "TransientStorageError": _ERRORS,
    "UnredactablePathError": _ERRORS,
    "UnsupportedDatabaseError": _ERRORS,
    "VerifyReport": _STORE,
    "View": "viewstore.domain.view",
    "ViewPage": _STORE,
    "ViewstoreError": _ERRORS,
    "append_with_retry": "viewstore.retry",
    "create_engine": _STORE,
    "parse_event": "viewstore.domain.events",
}
_RENAMED = {"create_engine": "create_engine_for"}

__all__ = [  # every name of _WHERE, and the version
    "AppendResult",
    "AsyncEventStore",
    "AuthenticationError",
    "ChainMismatchError",
    "CheckpointError",
    "CompactedHistoryError",
    "CompactionReport",
    "ConcurrencyError",
    "ConversationErasedError",
    "ConversationExistsError",
    "ConversationHasForksError",
    "ConversationInfo",
    "ConversationNotFoundError",
    "ConversationOwnedError",
    "ConversationPage",
    "DamagedBaseStateError",
    "DatabaseNotFoundError",
    "DuplicateEventError",
    "Event",
    "EventStore",
    "FeedEntry",
    "ForkOrigin",
    "InvalidArgumentError",
    "InvalidEventError",
    "ManipulationIndices",
    "MaskRecord",
    "MaskingRules",
    "MissingExtraError",
    "NoManipulationIndexError",
    "PayloadTooLargeError",
    "Redaction",
    "RetentionPolicy",
    "RetentionReport",
    "Role",
    "RunnerHeldError",
    "RunnerLostError",
    "SchemaError",
    "SchemaMismatchError",
    "SearchHit",
    "SearchPage",
    "ServerUnreachableError",
    "StorageError",
    "StoredEvent",
    "StoredView",
    "Tombstone",
    "TransientStorageError",
    "UnredactablePathError",
    "UnsupportedDatabaseError",
    "VerifyReport",
    "View",
    "ViewPage",
    "ViewstoreError",
    "__version__",
    "append_with_retry",
    "create_engine",
    "parse_event",
]


__getattr__, __dir__ = lazy_names(__name__, _WHERE, _RENAMED)
