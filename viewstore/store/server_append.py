"""The fast append as a call of the server-side function ``viewstore_append`` (migration
0011), on PostgreSQL.

Same writes as the fast path's single statement (``fast_path.postgres_statement``), but the
statements live in the server: the client sends one call with one array per column, and the
server keeps the plans. Where the function is missing (a database migrated by an older
viewstore and not since), or the tables are partitioned, the store sends the statement.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Engine, text

from viewstore.store import rows

FUNCTION = "viewstore_append"
#: The function's parameters in order: (what, SQL type). Events, view rows, new indices,
#: closed indices: one array per column.
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
_EVENTS = (
    ("seq", "bigint"),
    ("event_id", "text"),
    ("kind", "text"),
    ("source", "text"),
    ("timestamp", "text"),
    ("parent_id", "text"),
    ("payload", "text"),
    ("hash", "text"),
    ("recorded_at", "timestamptz"),
)
_ENTRIES = (
    ("order_key", "text"),
    ("event_id", "text"),
    ("seq", "bigint"),
    ("kind", "text"),
    ("role", "text"),
    ("tool_call_id", "text"),
    ("llm_response_id", "text"),
    ("thinking", "boolean"),
    ("entered_seq", "bigint"),
    ("left_seq", "bigint"),
    ("payload", "text"),
    ("source", "text"),
    ("timestamp", "text"),
    ("parent_id", "text"),
    ("is_summary", "boolean"),
    ("envelope", "text"),
)
_INDICES = (("position", "integer"), ("from_seq", "bigint"), ("to_seq", "bigint"))
_CLOSED = (("position", "integer"), ("to_seq", "bigint"))


def _types() -> list[str]:
    types = ["text", "bigint", "text", *(t for _, t in _STATE)]
    for columns in (_EVENTS, _ENTRIES, _INDICES, _CLOSED):
        types.extend(f"{t}[]" for _, t in columns)
    return types


def signature() -> str:
    """The function's argument types, as ``regprocedure`` spells them after its name."""
    return ", ".join(_types())


@cache
def _call() -> str:
    return f"SELECT {FUNCTION}({', '.join(f'%s::{t}' for t in _types())})"


def available(engine: Engine) -> bool:
    """Whether to call the function: the database has it (migration 0011), and its tables
    are not partitioned. A function's statements run on cached generic plans, which prune
    partitions at run time on every call; the single statement is planned with its values
    and pruned once, and measured faster there (docs/distribution.md)."""
    query = (
        f"SELECT to_regproc('{FUNCTION}') IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass('events'))"
    )
    with engine.connect() as conn:
        found = conn.execute(text(query)).scalar()
    return bool(found)


def call(plan: Any) -> tuple[str, list[Any]]:
    """The call of the function for a fast-path plan, and its parameters."""
    state = rows.state_values(plan.tail.state, plan.tail.last_hash)
    state["updated_at"] = plan.now
    entries = [rows.entry_params(plan.key, entry) for entry in plan.projection.new_entries]
    indices = [
        {"position": r.position, "from_seq": r.from_seq, "to_seq": r.to_seq}
        for r in plan.projection.new_indices
    ]
    closed = [
        {"position": position, "to_seq": seq}
        for position, seq in plan.projection.closed_indices.items()
    ]
    params: list[Any] = [plan.key, plan.previous.state.version, plan.previous.last_hash]
    params.extend(state[name] for name, _ in _STATE)
    for columns, table_rows in (
        (_EVENTS, plan.log),
        (_ENTRIES, entries),
        (_INDICES, indices),
        (_CLOSED, closed),
    ):
        params.extend([row[name] for row in table_rows] for name, _ in columns)
    return _call(), params
