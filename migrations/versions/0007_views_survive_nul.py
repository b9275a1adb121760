"""The analyst views read any payload: a NUL character in a payload reads as U+FFFD there.

Revision ID: 0007
Revises: 0004
Create Date: 2026-11-23

A payload may hold NUL (``\\u0000`` in its JSON text) and the log keeps it exactly. But
PostgreSQL text cannot hold NUL: ``payload ->> 'field'`` on the ``json`` payload of
``attention_window`` or ``view_history`` failed for every row of the query as soon as one
payload anywhere held the escape ("\\u0000 cannot be converted to text"), and SQLite's JSON
functions cut the text at the NUL. The two views now show the payload with every NUL escape
turned into ``\\ufffd`` (U+FFFD, the replacement character), as ``condensations.summary``
already does; the exact JSON stays in the log (``store.events``, ``viewstore export``).

Only a real escape is replaced: in ``\\\\u0000`` the backslash is itself escaped and the text
means a backslash followed by ``u0000``. The expression first hides every escaped backslash
(``\\\\``, matched left to right as a JSON reader pairs them) behind U+0001, which the store's
JSON text never holds raw (control characters are always escaped), then replaces
``\\u0000``, then restores the backslashes. Payloads without the escape are passed through.

The view SQL is frozen here, and the downgrade restores the views of revision 0003.
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0004"
branch_labels = None
depends_on = None

READER_ROLE = "viewstore_reader"
VIEWS = ("attention_window", "view_history")

# The payload expression per dialect, over the view_entries column ``payload``.
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
_EXACT = {"postgresql": "CAST(payload AS json)", "sqlite": "payload"}


def _create_views(payload: str) -> None:
    op.execute(
        f"""
        CREATE VIEW attention_window AS
        SELECT conversation_id,
               ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY order_key) - 1
                   AS position,
               event_id,
               kind,
               source,
               timestamp,
               {payload} AS payload,
               seq
        FROM view_entries
        WHERE left_seq IS NULL
        """
    )
    op.execute(
        f"""
        CREATE VIEW view_history AS
        SELECT conversation_id,
               order_key,
               event_id,
               kind,
               seq,
               entered_seq,
               left_seq,
               source,
               timestamp,
               {payload} AS payload
        FROM view_entries
        """
    )


def _replace_views(expressions: dict[str, str]) -> None:
    dialect = op.get_bind().dialect.name
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    _create_views(expressions[dialect])
    if dialect == "postgresql":
        # Dropping a view dropped its grants: give them back where revision 0002 created the
        # reader role.
        op.execute(
            f"""
            DO $$
            BEGIN
                IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER_ROLE}') THEN
                    GRANT SELECT ON {", ".join(VIEWS)} TO {READER_ROLE};
                END IF;
            END $$
            """
        )


def upgrade() -> None:
    _replace_views(_NUL_SAFE)


def downgrade() -> None:
    _replace_views(_EXACT)
