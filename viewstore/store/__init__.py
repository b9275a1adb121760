"""The SQL store's face: the ``EventStore``, the records it returns, and the few helpers the
adapters share with it. Adapters (viewstore.aio, cli, web, ...) import the store from here
only, never from a module below it (tests/test_layers.py holds them to that), so what is
inside the store can move without touching them.

Each name is imported on first use (viewstore/store/lazy.py): ``from viewstore.store import
EventStore`` loads what the store needs to read, not the append machinery."""

from __future__ import annotations

from typing import TYPE_CHECKING

from viewstore.store.lazy import lazy_names

if TYPE_CHECKING:
    from viewstore.store.adapters.runners import Order as ServerOrder
    from viewstore.store.append.batch import EventInput
    from viewstore.store.cursors import (
        EXACT_COUNT_LIMIT,
        MAX_CURSOR,
        MAX_FEED_LIMIT,
        MAX_LIMIT,
        Order,
    )
    from viewstore.store.database.engine import (
        ASYNC_SUPPORTED,
        check_schema,
        check_supported,
        configure,
        create_engine_for,
        default_url,
        engine_options,
        missing_driver,
        normalize_url,
    )
    from viewstore.store.distribution.shard_feed import check_map
    from viewstore.store.event_store import EventStore
    from viewstore.store.feed.follow import ListenTarget
    from viewstore.store.feed.follow_async import follow_async
    from viewstore.store.feed.follow_hub import FollowHub
    from viewstore.store.feed.follow_state import DEFAULT_LIMIT, DEFAULT_POLL, FollowState
    from viewstore.store.inputs import (
        DEFAULT_MAX_EVENT_BYTES,
        check_integer,
        conversation_key,
        new_conversation_key,
    )
    from viewstore.store.lifecycle.policy import RetentionPolicy
    from viewstore.store.pausing import pause
    from viewstore.store.records import (
        AppendResult,
        BaseState,
        CompactionReport,
        CondensationRecord,
        ConversationInfo,
        ConversationPage,
        ConversationReport,
        FeedEntry,
        ForkOrigin,
        MaskRecord,
        Redaction,
        RetentionReport,
        RunnerClaim,
        SearchHit,
        SearchPage,
        ServerConversation,
        SourceInfo,
        StoredEvent,
        StoredView,
        StoreStats,
        Tombstone,
        VerifyReport,
        ViewPage,
        ViewSizes,
    )
    from viewstore.store.store_core import ConversationId

#: Each module below the face, and the names the face offers from it.
_OFFERED = {
    "viewstore.store.adapters.runners": ["ServerOrder"],
    "viewstore.store.append.batch": ["EventInput"],
    "viewstore.store.database.engine": [
        "ASYNC_SUPPORTED",
        "check_schema",
        "check_supported",
        "configure",
        "create_engine_for",
        "default_url",
        "engine_options",
        "missing_driver",
        "normalize_url",
    ],
    "viewstore.store.event_store": ["EventStore"],
    "viewstore.store.inputs": [
        "DEFAULT_MAX_EVENT_BYTES",
        "check_integer",
        "conversation_key",
        "new_conversation_key",
    ],
    "viewstore.store.pausing": ["pause"],
    "viewstore.store.lifecycle.policy": ["RetentionPolicy"],
    "viewstore.store.cursors": [
        "EXACT_COUNT_LIMIT",
        "MAX_CURSOR",
        "MAX_FEED_LIMIT",
        "MAX_LIMIT",
        "Order",
    ],
    "viewstore.store.feed.follow": ["ListenTarget"],
    "viewstore.store.feed.follow_async": ["follow_async"],
    "viewstore.store.feed.follow_hub": ["FollowHub"],
    "viewstore.store.feed.follow_state": ["DEFAULT_LIMIT", "DEFAULT_POLL", "FollowState"],
    "viewstore.store.distribution.shard_feed": ["check_map"],
    "viewstore.store.records": [
        "AppendResult",
        "BaseState",
        "CompactionReport",
        "CondensationRecord",
        "ConversationInfo",
        "ConversationPage",
        "ConversationReport",
        "FeedEntry",
        "ForkOrigin",
        "MaskRecord",
        "Redaction",
        "RetentionReport",
        "RunnerClaim",
        "SearchHit",
        "SearchPage",
        "ServerConversation",
        "SourceInfo",
        "StoredEvent",
        "StoredView",
        "StoreStats",
        "Tombstone",
        "VerifyReport",
        "ViewPage",
        "ViewSizes",
    ],
    "viewstore.store.store_core": ["ConversationId"],
}
_WHERE = {name: module for module, names in _OFFERED.items() for name in names}

__all__ = [  # every name of _OFFERED (tests/test_layers.py)
    "ASYNC_SUPPORTED",
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_POLL",
    "EXACT_COUNT_LIMIT",
    "MAX_CURSOR",
    "MAX_FEED_LIMIT",
    "MAX_LIMIT",
    "AppendResult",
    "BaseState",
    "CompactionReport",
    "CondensationRecord",
    "ConversationId",
    "ConversationInfo",
    "ConversationPage",
    "ConversationReport",
    "EventInput",
    "EventStore",
    "FeedEntry",
    "FollowHub",
    "FollowState",
    "ForkOrigin",
    "ListenTarget",
    "MaskRecord",
    "Order",
    "Redaction",
    "RetentionPolicy",
    "RetentionReport",
    "RunnerClaim",
    "SearchHit",
    "SearchPage",
    "ServerConversation",
    "ServerOrder",
    "SourceInfo",
    "StoreStats",
    "StoredEvent",
    "StoredView",
    "Tombstone",
    "VerifyReport",
    "ViewPage",
    "ViewSizes",
    "check_integer",
    "check_map",
    "check_schema",
    "check_supported",
    "configure",
    "conversation_key",
    "create_engine_for",
    "default_url",
    "engine_options",
    "follow_async",
    "missing_driver",
    "new_conversation_key",
    "normalize_url",
    "pause",
]
__getattr__, __dir__ = lazy_names(__name__, _WHERE, {"ServerOrder": "Order"})
