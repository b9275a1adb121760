"""The one seam between the store's core and how its tables are spread (docs/distribution.md).

The core (``StoreCore``, ``EventStore`` and its method groups) asks this object, and nothing
else of ``store/distribution/``, the few questions whose answer depends on the layout: is the
log distributed over a Citus cluster (then the feed is read per node, a fork's id is placed on
its source's shard, no notification wakes a follower), does an append call the server-side
function, and how a store is partitioned or distributed. Partitions need nothing at run time:
a partitioned table answers every statement as a plain one does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine

from viewstore.store.distribution import citus, partitions, server_append
from viewstore.store.distribution.shard_feed import NodeFeeds

if TYPE_CHECKING:
    from viewstore.store.records import FeedEntry


class Distribution:
    """The layout of one store's tables, as its core needs to know it."""

    def __init__(self, engine: Engine, *, server_function: bool | None) -> None:
        self._engine = engine
        self._feeds = NodeFeeds(engine)
        self._server_function = server_function

    def sharded(self, conn: Connection) -> bool:
        """Whether the log is distributed over a Citus cluster."""
        return self._feeds.sharded(conn)

    def node_feeds(self, conn: Connection, after: str | None, limit: int) -> list[FeedEntry]:
        """The feed of a distributed log, read on each node and merged (``shard_feed``)."""
        return self._feeds.read(conn, after, limit)

    def fork_id(self, conn: Connection, source: str) -> str:
        """An id for a new fork of ``source``: on a distributed log, one the cluster places on
        the source's shard, so a family stays on one node; else a random one."""
        return citus.colocated_id(conn, source) if self.sharded(conn) else uuid.uuid4().hex

    def server_function(self) -> bool:
        """Whether a PostgreSQL fast-path append calls ``viewstore_append_rows`` (the store's
        setting, else whether the database has it and its tables allow it; found once)."""
        if self._server_function is None:
            self._server_function = server_append.available(self._engine)
        return self._server_function

    def distribute(self, conn: Connection | None, *, dry_run: bool) -> list[str]:
        """Distribute the store over Citus (``citus``) on ``conn``; ``dry_run``: only say the
        statements (no connection needed)."""
        database = self._engine.url.database or ""
        if dry_run or conn is None:
            return citus.statements(database)
        return citus.distribute(conn, database)

    @staticmethod
    def check_partitions(count: int) -> int:
        return partitions.check_count(count)

    def close(self) -> None:
        self._feeds.close()
