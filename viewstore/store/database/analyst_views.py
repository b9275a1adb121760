"""The analysts' views of the view rows, ``attention_window`` and ``view_history``, as revision
0026 defines them (and, for its downgrade, as revision 0022 did).

Each row of either is a view row with its event: the log's row (its holder's, for a fork's
copied rows), or for a summary the row itself. Since revision 0026 an event's row names its
event by seq only, so its id and kind come from the log row too; a row the migration has not
reached yet still shows its own, equal, copies. The payload is shown as revision 0007 showed
it (a NUL escape as U+FFFD). docs/schema.md documents the columns.
"""

from __future__ import annotations

import sqlalchemy as sa

from viewstore.store.database.forgotten import select_grants

NAMES = ("attention_window", "view_history")

# A PostgreSQL ``::`` cast would read as a bound parameter, hence CAST.
_NUL_SAFE = {
    "postgresql": (
        "CAST(CASE WHEN strpos(payload, E'\\\\u0000') = 0 THEN payload "
        "ELSE replace(replace(replace(payload, E'\\\\\\\\', chr(1)), "
        "E'\\\\u0000', E'\\\\ufffd'), chr(1), E'\\\\\\\\') END AS json)"
    ),
    "sqlite": (
        "CASE WHEN instr(payload, '\\u0000') = 0 THEN payload "
        "ELSE replace(replace(replace(payload, '\\\\', char(1)), "
        "'\\u0000', '\\ufffd'), char(1), '\\\\') END"
    ),
}


def _field(name: str) -> str:
    return f"CASE WHEN v.is_summary THEN v.{name} ELSE COALESCE(v.{name}, e.{name}) END"


def _rows(ids_from_log: bool) -> str:
    event_id, kind = (
        ("COALESCE(v.event_id, e.event_id)", "COALESCE(v.kind, e.kind)")
        if ids_from_log
        else ("v.event_id", "v.kind")
    )
    return f"""
    SELECT v.conversation_id, v.order_key, {event_id} AS event_id, {kind} AS kind, v.seq,
           v.entered_seq, v.left_seq, {_field("source")} AS source,
           {_field("timestamp")} AS timestamp, COALESCE(v.payload, e.payload) AS payload
    FROM view_entries v
    LEFT JOIN events e
        ON e.conversation_id = COALESCE(v.holder, v.conversation_id) AND e.seq = v.seq
"""


def replace(conn: sa.Connection, *, ids_from_log: bool) -> None:
    """Make both views again (``ids_from_log``: revision 0026's; else 0022's), each with the
    SELECT grants it had."""
    grants = {name: select_grants(conn, name) for name in NAMES}
    for name in NAMES:
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {name}")
    payload = _NUL_SAFE[conn.dialect.name]
    rows = _rows(ids_from_log)
    conn.exec_driver_sql(
        f"""
        CREATE VIEW attention_window AS
        SELECT conversation_id,
               ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY order_key) - 1
                   AS position,
               event_id, kind, source, timestamp, {payload} AS payload, seq
        FROM ({rows} WHERE v.left_seq IS NULL) AS r
        """
    )
    conn.exec_driver_sql(
        f"""
        CREATE VIEW view_history AS
        SELECT conversation_id, order_key, event_id, kind, seq, entered_seq, left_seq, source,
               timestamp, {payload} AS payload
        FROM ({rows}) AS r
        """
    )
    for name, grantees in grants.items():
        for grantee in grantees:
            conn.exec_driver_sql(f"GRANT SELECT ON {name} TO {grantee}")
