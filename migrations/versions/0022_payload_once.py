"""Each payload stored once: view rows read their event from the log.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-25

Since revision 0003 every ``view_entries`` row carried a copy of its event (``payload``,
``source``, ``timestamp``, ``parent_id``), so a conversation held each payload twice, or more
(its forks' rows had copies too), and an append wrote it twice. Now a read joins the log on its
primary key ``(conversation_id, seq)``; only a summary's row keeps its event, which the log has
no row of. A fork's rows copied from its source name the log holding their event in the new
column ``holder`` (NULL on every other row): still O(view) rows per fork, and a read needs no
walk of the lineage. docs/schema.md gives the measures behind the choice.

The DDL is instant and committed first: ``holder`` added, ``payload`` made nullable
(PostgreSQL: ``DROP NOT NULL``; SQLite cannot alter a column's constraint in place, and the
documented way to drop a NOT NULL whose removal changes no stored byte is to edit the table's
text in ``sqlite_schema`` under ``writable_schema``), the analyst views ``attention_window`` and
``view_history`` redefined over the join (their grants kept). On a store holding rows it runs in
a transaction of its own that locks its tables first, as appends do
(``viewstore.store.database.online_ddl``). Then ``viewstore.store.database.payload_once`` sets
the forks' holders and NULLs the copies in short transactions: appends, forks and reads go on
meanwhile (a fork made meanwhile is taken too), and a migration killed half way finishes when
run again. The downgrade writes the copies back from the log.

PostgreSQL: the log's ``payload`` is compressed with lz4 where the server has it (new rows;
pglz otherwise) and stored ``MAIN``: compressed and kept in its row, moved out of line only
when it does not fit a page. PostgreSQL compresses only a row above about 2 kB whatever the
table's ``toast_tuple_target`` (measured: a 600-byte payload is stored raw with the target at
256), so this helps the long payloads (observations, system prompts), not the typical one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from viewstore.store.database import forgotten, online_ddl, payload_once

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

VIEWS = ("attention_window", "view_history")

# The payload as 0007 shows it (a NUL escape as U+FFFD), over the column ``payload`` of
# the rows below.
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


# Each view row with its event: the log's row (its holder's, for a fork's copied rows), or for
# a summary the row itself. A row still carrying its copy (0022 half done) shows the copy.
_ROWS = f"""
    SELECT v.conversation_id, v.order_key, v.event_id, v.kind, v.seq, v.entered_seq,
           v.left_seq, {_field("source")} AS source, {_field("timestamp")} AS timestamp,
           COALESCE(v.payload, e.payload) AS payload
    FROM view_entries v
    LEFT JOIN events e
        ON e.conversation_id = COALESCE(v.holder, v.conversation_id) AND e.seq = v.seq
"""


def _create_joined_views(dialect: str) -> None:
    payload = _NUL_SAFE[dialect]
    op.execute(
        f"""
        CREATE VIEW attention_window AS
        SELECT conversation_id,
               ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY order_key) - 1
                   AS position,
               event_id, kind, source, timestamp, {payload} AS payload, seq
        FROM ({_ROWS} WHERE v.left_seq IS NULL) AS r
        """
    )
    op.execute(
        f"""
        CREATE VIEW view_history AS
        SELECT conversation_id, order_key, event_id, kind, seq, entered_seq, left_seq, source,
               timestamp, {payload} AS payload
        FROM ({_ROWS}) AS r
        """
    )


def _create_copy_views(dialect: str) -> None:
    """The views of revision 0007, over the copies."""
    payload = _NUL_SAFE[dialect]
    op.execute(
        f"""
        CREATE VIEW attention_window AS
        SELECT conversation_id,
               ROW_NUMBER() OVER (PARTITION BY conversation_id ORDER BY order_key) - 1
                   AS position,
               event_id, kind, source, timestamp, {payload} AS payload, seq
        FROM view_entries
        WHERE left_seq IS NULL
        """
    )
    op.execute(
        f"""
        CREATE VIEW view_history AS
        SELECT conversation_id, order_key, event_id, kind, seq, entered_seq, left_seq, source,
               timestamp, {payload} AS payload
        FROM view_entries
        """
    )


def _grants(bind: sa.Connection) -> list[str]:
    """PostgreSQL: the GRANTs the views have now (0002's reader, 0008's roles, an operator's),
    to give back once they are created again."""
    if bind.dialect.name != "postgresql":
        return []
    found = bind.execute(
        sa.text(
            "SELECT c.relname, a.privilege_type, "
            "CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END "
            "FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a "
            "LEFT JOIN pg_roles r ON r.oid = a.grantee "
            "WHERE c.oid IN (to_regclass('attention_window'), to_regclass('view_history')) "
            "AND a.grantee <> c.relowner"
        )
    )
    return [f"GRANT {privilege} ON {view} TO {grantee}" for view, privilege, grantee in found]


def _replace_views(bind: sa.Connection, create: object) -> None:
    grants = _grants(bind)
    for view in VIEWS:
        op.execute(f"DROP VIEW IF EXISTS {view}")
    create(bind.dialect.name)  # type: ignore[operator]
    for grant in grants:
        op.execute(grant)


def _has_holder(bind: sa.Connection) -> bool:
    return "holder" in {column["name"] for column in sa.inspect(bind).get_columns("view_entries")}


def _postgres_log_storage(bind: sa.Connection, *, compressed: bool) -> None:
    """The log's payload compressed in its row (lz4 where the server has it), or as before."""
    lz4 = bind.execute(
        sa.text(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
    ).scalar()
    method = ("lz4" if lz4 else "pglz") if compressed else "default"
    storage = "MAIN" if compressed else "EXTENDED"
    op.execute(f"ALTER TABLE events ALTER COLUMN payload SET COMPRESSION {method}")
    op.execute(f"ALTER TABLE events ALTER COLUMN payload SET STORAGE {storage}")


def _ddl(bind: sa.Connection) -> None:
    """The instant part: no stored byte changes."""
    if not _has_holder(bind):
        op.add_column("view_entries", sa.Column("holder", sa.String(255), nullable=True))
    if bind.dialect.name == "sqlite":
        payload_once.sqlite_not_null(bind, "view_entries", "payload", not_null=False)
    else:
        op.alter_column("view_entries", "payload", existing_type=sa.Text(), nullable=True)
        _postgres_log_storage(bind, compressed=True)
    _replace_views(bind, _create_joined_views)
    # Revisions 0023's, 0024's and 0026's own DDL, here too: an append made while the batches
    # below run comes from code that writes an event's row without an envelope (revision
    # 0023), id or kind (revision 0026), and a condensation's ``not_in_view`` (revision 0024;
    # without it every append of a condensation failed, issue 37).
    payload_once.envelope_nullable(bind, nullable=True)
    payload_once.ids_nullable(bind, nullable=True)
    forgotten.add_not_in_view(bind)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT 1 FROM view_entries LIMIT 1")).first() is None:
        _ddl(bind)
        return  # a new store: nothing to move, and the migration stays one transaction
    # The revisions before are committed, then the DDL in a short transaction of its own that
    # locks its tables as appends do (``online_ddl``). The batches below take the write lock
    # for one short transaction each; the migration lock is taken again after them.
    online_ddl.run_alone(bind, lambda: _ddl(bind), ("events", "view_entries", "condensations"))
    payload_once.set_holders(bind)
    payload_once.drop_copies(bind)
    payload_once.relock(bind)


_FILL = """
    UPDATE view_entries SET
        payload = (SELECT e.payload FROM events e
                   WHERE e.conversation_id = COALESCE(view_entries.holder,
                                                      view_entries.conversation_id)
                   AND e.seq = view_entries.seq),
        source = (SELECT e.source FROM events e
                  WHERE e.conversation_id = COALESCE(view_entries.holder,
                                                     view_entries.conversation_id)
                  AND e.seq = view_entries.seq),
        timestamp = (SELECT e.timestamp FROM events e
                     WHERE e.conversation_id = COALESCE(view_entries.holder,
                                                        view_entries.conversation_id)
                     AND e.seq = view_entries.seq),
        parent_id = (SELECT e.parent_id FROM events e
                     WHERE e.conversation_id = COALESCE(view_entries.holder,
                                                        view_entries.conversation_id)
                     AND e.seq = view_entries.seq)
    WHERE NOT is_summary AND payload IS NULL
"""


def downgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    op.execute(_FILL)
    # A store stopped before revision 0024 has the column this revision's DDL adds for it.
    forgotten.drop_not_in_view(bind)
    # A store stopped during 0023's batches is stamped 0022, and may hold event rows without
    # an envelope, and rows appended meanwhile without an id or kind (revision 0026), which
    # revisions before 0022 read: the ids first, which the envelopes are packed with.
    payload_once.fill_ids(bind)
    payload_once.ids_nullable(bind, nullable=False)
    payload_once.fill_envelopes(bind)
    payload_once.envelope_nullable(bind, nullable=False)
    _replace_views(bind, _create_copy_views)
    if dialect == "sqlite":
        payload_once.sqlite_not_null(bind, "view_entries", "payload", not_null=True)
        op.execute("ALTER TABLE view_entries DROP COLUMN holder")
    else:
        op.alter_column("view_entries", "payload", existing_type=sa.Text(), nullable=False)
        op.drop_column("view_entries", "holder")
        _postgres_log_storage(bind, compressed=False)
