"""The per-node feed's cursor and merge (viewstore.store.distribution.shard_feed), which need
no cluster; tests/ops/test_citus.py runs the feed itself on a real Citus cluster."""

from __future__ import annotations

import pytest

from viewstore import InvalidArgumentError
from viewstore.store.distribution.shard_feed import decode_map, encode_map, merge, node_query

NODES = ["10.0.0.1:5432", "10.0.0.2:5432"]


def test_the_map_cursor_round_trips_and_takes_a_single_server_cursor() -> None:
    positions = {NODES[0]: (12, 7), NODES[1]: (3, 9)}
    assert decode_map(encode_map(positions), NODES) == positions
    assert decode_map(None, NODES) == dict.fromkeys(NODES, (0, 0))
    assert decode_map("5.6", NODES) == dict.fromkeys(NODES, (5, 6))
    # A node the cursor does not know (added later) starts from its beginning.
    assert decode_map(f"{NODES[0]}=1.2", NODES) == {NODES[0]: (1, 2), NODES[1]: (0, 0)}


@pytest.mark.parametrize("cursor", ["x", "a=b", "=1.2", "a b=1.2", "n=1.2;m", 7])
def test_a_malformed_map_cursor_is_refused(cursor: object) -> None:
    with pytest.raises(InvalidArgumentError):
        decode_map(cursor, NODES)  # type: ignore[arg-type]


def test_merge_interleaves_by_record_time_and_each_cursor_resumes_exactly() -> None:
    streams = {
        NODES[0]: [
            (1, 1, "a", 1, "a1", "K", 1.0),
            (1, 2, "a", 2, "a2", "K", 3.0),
            (4, 9, "a", 3, "a3", "K", 4.0),
        ],
        NODES[1]: [(2, 3, "b", 1, "b1", "K", 2.0)],
    }
    start = decode_map(None, NODES)
    every = merge(streams, start, 10)
    assert [e.event_id for e in every] == ["a1", "b1", "a2", "a3"]
    # Resuming from any entry's cursor gives exactly the entries after it, node by node.
    for i, entry in enumerate(every):
        resumed = decode_map(entry.cursor, NODES)
        rest = {
            node: [row for row in rows if (row[0], row[1]) > resumed[node]]
            for node, rows in streams.items()
        }
        after = merge(rest, resumed, 10)
        assert sorted(e.event_id for e in after) == sorted(e.event_id for e in every[i + 1 :])
    assert [e.event_id for e in merge(streams, start, 2)] == ["a1", "b1"]


def test_each_node_is_read_in_one_statement_below_its_own_horizon() -> None:
    sql = node_query(["events_102008", "viewstore.events_102010"])
    assert sql.count("SELECT") == 3 and "UNION ALL" in sql
    assert '"viewstore"."events_102010"' in sql
    assert "pg_snapshot_xmin(pg_current_snapshot())" in sql
