"""The change feed of a store distributed over several nodes (Citus): one feed per node.

The single-server feed (``viewstore.store.feed.feed``) orders events by ``(txid, position)`` and
returns only those below the reading snapshot's ``xmin``. That argument needs the ``txid`` of
a row and the horizon to come from one transaction counter. On a Citus cluster each node has
its own: so each node's rows are stamped with *that node's* transaction id, by a trigger the
shards run (``viewstore_feed_txid``, created by ``viewstore citus distribute``), and each
node is read with *its own* snapshot, by one statement over the shards it holds. Each node's
stream then has the single-server guarantee (a transaction still prepared under two-phase
commit is still running on its node, so it stays above that node's horizon), and the feed is
their union.

The cursor is a map from node to that node's ``(txid, position)``, written
``node=CURSOR;node=CURSOR``, each a single-server cursor (``viewstore.store.feed.feed``). A
single-server cursor given to a sharded store applies to every node, and a node missing from a
map starts from its beginning. Events of one
conversation come in commit order (a conversation lives on one node); events of conversations
on different nodes have no commit order between them, and are interleaved by the time each was
recorded.
docs/distribution.md discusses shard moves.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, text

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.cursors import decode_feed_cursor, feed_cursor
from viewstore.store.records import FeedEntry

Position = tuple[int, int]
_NODE = re.compile(r"[A-Za-z0-9_.:\-\[\]]{1,300}")


@dataclass(frozen=True)
class NodeShards:
    """One node of the cluster and the shard tables of the log it holds."""

    name: str  # host:port, as the cluster's metadata names it
    host: str
    port: int
    tables: tuple[str, ...]


def encode_map(positions: Mapping[str, Position]) -> str:
    return ";".join(f"{node}={feed_cursor(*positions[node])}" for node in sorted(positions))


def decode_map(cursor: str | None, nodes: Sequence[str]) -> dict[str, Position]:
    """Each node's position in ``cursor`` (a map, a single-server cursor, or None)."""
    start = dict.fromkeys(nodes, (0, 0))
    if cursor is None:
        return start
    if not isinstance(cursor, str):
        raise InvalidArgumentError(
            f"feed cursor must be a string from FeedEntry.cursor, got {type(cursor).__name__}"
        )
    if "=" not in cursor:
        single = decode_feed_cursor(cursor)
        return dict.fromkeys(nodes, single)
    found = dict(start)
    for part in cursor.split(";"):
        node, _, position = part.partition("=")
        if not _NODE.fullmatch(node):
            raise InvalidArgumentError(f"malformed feed cursor {cursor[:80]!r}")
        found[node] = decode_feed_cursor(position)
    return found


def check_map(cursor: str) -> None:
    """Raise ``InvalidArgumentError`` unless ``cursor`` is a well-formed map or position."""
    decode_map(cursor, [])


def nodes_of(conn: Connection) -> list[NodeShards]:
    """The nodes holding shards of the log, from the coordinator's metadata."""
    rows = conn.execute(
        text(
            "SELECT nodename, nodeport, shard_name FROM citus_shards "
            "WHERE table_name = 'events'::regclass ORDER BY nodename, nodeport, shard_name"
        )
    ).all()
    tables: dict[tuple[str, int], list[str]] = {}
    for host, port, shard in rows:
        tables.setdefault((host, int(port)), []).append(shard)
    return [
        NodeShards(f"{host}:{port}", host, port, tuple(names))
        for (host, port), names in sorted(tables.items())
    ]


def node_query(tables: Sequence[str]) -> str:
    """The feed after ``(:t, :p)`` of one node, over its shards, below its own horizon: one
    statement, so one snapshot, whose ``xmin`` is that node's."""
    columns = "txid, position, conversation_id, seq, event_id, kind, recorded_at"
    union = " UNION ALL ".join(f"SELECT {columns} FROM {_quoted(table)}" for table in tables)
    return (
        f"SELECT {columns} FROM ({union}) AS shard_log "
        "WHERE (txid, position) > (:t, :p) "
        "AND txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint "
        "ORDER BY txid, position LIMIT :n"
    )


def _quoted(table: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in table.split("."))


def read_node(
    conn: Connection, node: NodeShards, after: Position, limit: int
) -> list[tuple[Any, ...]]:
    if not node.tables:
        return []
    params = {"t": after[0], "p": after[1], "n": limit}
    return [tuple(row) for row in conn.execute(text(node_query(node.tables)), params)]


def merge(
    streams: Mapping[str, list[tuple[Any, ...]]], start: Mapping[str, Position], limit: int
) -> list[FeedEntry]:
    """At most ``limit`` entries, each node's in its own order, the nodes interleaved by the
    time each event was recorded (an approximation of commit order across nodes, which have no
    common order; ties go to the node named first). Each entry's cursor is the map of every
    node's position once that entry is consumed."""
    positions = dict(start)
    heads = [(rows[0][6], node, 0) for node, rows in streams.items() if rows]
    heapq.heapify(heads)
    out: list[FeedEntry] = []
    while heads and len(out) < limit:
        _, node, index = heapq.heappop(heads)
        rows = streams[node]
        txid, position, conversation_id, seq, event_id, kind, _ = rows[index]
        positions[node] = (int(txid), int(position))
        out.append(
            FeedEntry(
                cursor=encode_map(positions),
                conversation_id=conversation_id,
                seq=int(seq),
                event_id=event_id,
                kind=kind,
            )
        )
        if index + 1 < len(rows):
            heapq.heappush(heads, (rows[index + 1][6], node, index + 1))
    return out


_HAS_CITUS = "SELECT 1 FROM pg_extension WHERE extname = 'citus'"
_LOG_DISTRIBUTED = "SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass"


class NodeFeeds:
    """The per-node feed of one store: whether its log is distributed, and connections to
    the nodes that hold its shards, opened when first needed."""

    def __init__(self, coordinator: Engine) -> None:
        self._coordinator = coordinator
        self._engines: dict[str, Engine] = {}
        self._sharded = False

    def sharded(self, conn: Connection) -> bool:
        """Whether the log is distributed (checked until it is: distribution is one-way)."""
        if not self._sharded and conn.dialect.name == "postgresql":
            self._sharded = bool(
                conn.execute(text(_HAS_CITUS)).first()
                and conn.execute(text(_LOG_DISTRIBUTED)).first()
            )
        return self._sharded

    def read(self, conn: Connection, after: str | None, limit: int) -> list[FeedEntry]:
        nodes = nodes_of(conn)
        start = decode_map(after, [node.name for node in nodes])
        streams = {}
        for node in nodes:
            with self._engine(node).connect() as node_conn:
                streams[node.name] = read_node(node_conn, node, start[node.name], limit)
        return merge(streams, start, limit)

    def _engine(self, node: NodeShards) -> Engine:
        engine = self._engines.get(node.name)
        if engine is None:
            url = self._coordinator.url.set(host=node.host, port=node.port)
            engine = self._engines[node.name] = create_engine(url, pool_size=1, max_overflow=2)
        return engine

    def close(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()
