"""The fast append as a call of the server-side function ``viewstore_append_rows``
(docs/schema.md), on PostgreSQL.

Same writes as the fast path's single statement (``fast_path.postgres_statement``), but the
statements live in the server: the client sends one call, the conversation row's new state as
arguments and the new rows as one JSON document, and the server keeps the plans. Where the
function is missing (a database migrated by an older viewstore and not since), or the tables
are partitioned, the store sends the statement.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from sqlalchemy import Engine, text

FUNCTION = "viewstore_append_rows"
#: The conversation row's new state, in the function's argument order: (column, SQL type).
_STATE = (
    ("version", "bigint"),
    ("unhandled_request", "boolean"),
    ("view_length", "integer"),
    ("pending_tool_calls", "text"),
    ("in_tool_loop", "boolean"),
    ("last_is_action", "boolean"),
    ("last_batch", "text"),
    ("last_hash", "text"),
    ("updated_at", "timestamptz"),
)
#: Columns the function fills itself: the conversation from its key, the record time from
#: ``updated_at``.
_IMPLIED = frozenset({"conversation_id", "recorded_at"})


def _types() -> list[str]:
    return ["text", "bigint", "text", *(t for _, t in _STATE), "jsonb"]


def signature() -> str:
    """The function's argument types, as ``regprocedure`` spells them after its name."""
    return ", ".join(_types())


@cache
def _call() -> str:
    return f"SELECT {FUNCTION}({', '.join(f'%s::{t}' for t in _types())})"


def available(engine: Engine) -> bool:
    """Whether to call the function: the database has it (docs/schema.md), and its tables
    are not partitioned. A function's statements run on cached generic plans, which prune
    partitions at run time on every call; there the function measured no faster than the
    single statement, which is planned with its values (docs/distribution.md)."""
    query = (
        f"SELECT to_regproc('{FUNCTION}') IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('events'))"
    )
    with engine.connect() as conn:
        found = conn.execute(text(query)).scalar()
    return bool(found)


def call(plan: Any) -> tuple[str, list[Any]]:
    """The call of the function for a fast-path plan, and its parameters."""
    from viewstore.store.append import rows  # noqa: PLC0415 - start-up time (event_store)

    state = rows.state_values(plan.tail.state, plan.tail.last_hash)
    state["updated_at"] = plan.now
    document = {
        "e": [_columns(row) for row in plan.log],
        "v": [_columns(rows.entry_params(plan.key, e)) for e in plan.projection.new_entries],
        "i": [
            {"position": r.position, "from_seq": r.from_seq, "to_seq": r.to_seq}
            for r in plan.projection.new_indices
        ],
        "c": [
            {"position": position, "to_seq": seq}
            for position, seq in plan.projection.closed_indices.items()
        ],
    }
    params: list[Any] = [plan.key, plan.previous.state.version, plan.previous.last_hash]
    params.extend(state[name] for name, _ in _STATE)
    params.append(json.dumps(document, ensure_ascii=False, separators=(",", ":")))
    return _call(), params


def _columns(row: dict[str, Any]) -> dict[str, Any]:
    # A key left out reads as NULL (jsonb_to_recordset): an event's view row leaves out its
    # empty payload, fields and holder (docs/schema.md), a shorter document to send and parse.
    return {
        name: value for name, value in row.items() if name not in _IMPLIED and value is not None
    }
