"""Revision 0024: ``condensation_forgotten`` is a SQL view of the condensations' payloads.

Until revision 0024 each id a ``Condensation`` lists was a row of its own (its conversation,
seq, the id and ``was_in_view``) with a primary key and an index of (conversation, id): 240
to 305 bytes an event in a condensed conversation, for ids every condensation's payload in
the log holds already. Now the condensation's row keeps only what its payload does not say:
``condensations.not_in_view``, a JSON array of the listed ids that were not in the view when
it ran (``[]`` nearly always), and ``condensation_forgotten`` is a view of the same name and
columns, which expands the payload's ``forgotten_event_ids`` (``json_each`` on SQLite,
``json_array_elements_text`` on PostgreSQL). Every query of it names a conversation; it reads
that conversation's condensations and their log rows by their primary keys.

Online, like revisions 0022 and 0023: the table is renamed ``LEGACY`` and the view made over
both (``view_sql(..., legacy=True)``: the condensations already moved from the payloads, the
others from the old rows), then ``move`` takes each condensation's old rows into its
``not_in_view`` and deletes them, a batch of condensations per transaction, and ``finish``
drops the emptied table and makes the view over the payloads alone. Reads are right at every
point; a migration killed half way carries on from the condensations left.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import sqlalchemy as sa

VIEW = "condensation_forgotten"
LEGACY = "condensation_forgotten_0023"
#: Condensations per transaction of ``move`` (each about a hundred old rows);
#: ``VIEWSTORE_MIGRATION_BATCH`` overrides it.
BATCH = 20


def pg_json(column: str) -> str:
    """``column`` (JSON text) as PostgreSQL ``json``, the escape \\u0000 replaced by U+FFFD
    first: PostgreSQL's JSON functions refuse it anywhere in a document (text cannot hold NUL),
    though JSON allows it and a payload may hold it."""
    return (
        f"CAST(CASE WHEN strpos({column}, E'\\\\u0000') = 0 THEN {column} "
        f"ELSE replace(replace(replace({column}, E'\\\\\\\\', chr(1)), "
        "E'\\\\u0000', E'\\\\ufffd'), chr(1), E'\\\\\\\\') END AS json)"
    )


_PG_PAYLOAD = pg_json("e.payload")  # no event id holds \u0000 or U+FFFD
_FROM_PAYLOADS = {
    "sqlite": """
        SELECT DISTINCT c.conversation_id AS conversation_id, c.seq AS seq,
               j.value AS event_id,
               NOT EXISTS (SELECT 1 FROM json_each(c.not_in_view) n WHERE n.value = j.value)
                   AS was_in_view
        FROM condensations c
        JOIN events e ON e.conversation_id = c.conversation_id AND e.seq = c.seq
        JOIN json_each(e.payload, '$.forgotten_event_ids') j
        WHERE j.type = 'text' {moved}
    """,
    "postgresql": f"""
        SELECT DISTINCT c.conversation_id AS conversation_id, c.seq AS seq,
               j.value AS event_id,
               NOT EXISTS (SELECT 1 FROM json_array_elements_text(CAST(c.not_in_view AS json))
                           AS n(value) WHERE n.value = j.value) AS was_in_view
        FROM condensations c
        JOIN events e ON e.conversation_id = c.conversation_id AND e.seq = c.seq
        CROSS JOIN LATERAL (SELECT {_PG_PAYLOAD} -> 'forgotten_event_ids' AS ids) f
        CROSS JOIN LATERAL json_array_elements_text(
            CASE WHEN json_typeof(f.ids) = 'array' THEN f.ids END) AS j(value)
        WHERE TRUE {{moved}}
    """,
}


def view_sql(dialect: str, *, legacy: bool) -> str:
    """``CREATE VIEW condensation_forgotten``: over the payloads, and while the migration
    runs, over the old rows of the condensations not moved yet."""
    if not legacy:
        return f"CREATE VIEW {VIEW} AS {_FROM_PAYLOADS[dialect].format(moved='')}"
    moved = _FROM_PAYLOADS[dialect].format(moved="AND c.not_in_view IS NOT NULL")
    return (
        f"CREATE VIEW {VIEW} AS {moved} UNION ALL "
        f"SELECT conversation_id, seq, event_id, was_in_view FROM {LEGACY}"
    )


def not_in_view(listed: frozenset[str] | set[str], left: set[str]) -> str:
    """``condensations.not_in_view``: the listed ids that did not leave the view (were not
    in it), as a JSON array in code-point order."""
    return json.dumps(sorted(listed - left), ensure_ascii=False, separators=(",", ":"))


def exists(conn: sa.Connection, name: str) -> bool:
    """Whether the store's schema has a table or view ``name``."""
    inspector = sa.inspect(conn)
    return name in inspector.get_table_names() or name in inspector.get_view_names()


# A batch: the next ``:n`` condensations of the old rows, by keyset from the last batch's last
# one (rows deleted before it are never walked again; on PostgreSQL they stay in the index
# until VACUUM), then all their rows in one range.
_AFTER = "(conversation_id > :c OR (conversation_id = :c AND seq > :s))"
_UPTO = "(conversation_id < :d OR (conversation_id = :d AND seq <= :t))"
_LAST = (
    f"SELECT conversation_id, seq FROM (SELECT DISTINCT conversation_id, seq FROM {LEGACY} "
    f"WHERE {_AFTER} ORDER BY conversation_id, seq LIMIT :n) AS b "
    "ORDER BY conversation_id DESC, seq DESC LIMIT 1"
)
_OLD_ROWS = (
    f"SELECT conversation_id, seq, event_id, was_in_view FROM {LEGACY} WHERE {_AFTER} AND {_UPTO}"
)
_SET = (
    "UPDATE condensations SET not_in_view = :v WHERE conversation_id = :c AND seq = :s "
    "AND not_in_view IS NULL"
)
_DELETE = f"DELETE FROM {LEGACY} WHERE {_AFTER} AND {_UPTO}"


def move(conn: sa.Connection, batch: int | None = None) -> int:
    """Take each condensation's old rows into its ``not_in_view`` and delete them, ``batch``
    condensations per transaction (four statements each); returns the batches run. The rows
    left are the work left: a run killed half way and started again finds them."""
    size = batch or int(os.environ.get("VIEWSTORE_MIGRATION_BATCH", BATCH))
    after: dict[str, object] = {"c": "", "s": 0}  # before every key: ids not empty, seqs >= 1
    batches = 0
    while True:
        last = conn.execute(sa.text(_LAST), {**after, "n": size}).first()
        if last is None:
            return batches
        bounds = {**after, "d": last[0], "t": last[1]}
        listed: dict[tuple[str, int], set[str]] = {}
        left: dict[tuple[str, int], set[str]] = {}
        for conversation_id, seq, event_id, was_in_view in conn.execute(sa.text(_OLD_ROWS), bounds):
            listed.setdefault((conversation_id, seq), set()).add(event_id)
            if was_in_view:
                left.setdefault((conversation_id, seq), set()).add(event_id)
        conn.execute(
            sa.text(_SET),
            [
                {"c": c, "s": s, "v": not_in_view(ids, left.get((c, s), set()))}
                for (c, s), ids in listed.items()
            ],
        )
        conn.execute(sa.text(_DELETE), bounds)
        conn.commit()
        after = {"c": last[0], "s": last[1]}
        batches += 1


def select_grants(conn: sa.Connection, name: str) -> list[str]:
    """PostgreSQL: the roles other than the owner that may SELECT ``name``."""
    if conn.dialect.name != "postgresql":
        return []
    found = conn.execute(
        sa.text(
            "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END "
            "FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a "
            "LEFT JOIN pg_roles r ON r.oid = a.grantee "
            "WHERE c.oid = to_regclass(:t) AND a.grantee <> c.relowner "
            "AND a.privilege_type = 'SELECT'"
        ),
        {"t": name},
    )
    return [grantee for (grantee,) in found]


#: The analyst view over ``condensation_forgotten`` (revision 0002's, unchanged): it is made
#: again whenever the one it reads is.
LOG = "condensation_log"
_LOG_SQL = """
    CREATE VIEW condensation_log AS
    SELECT c.conversation_id,
           c.seq AS condensation_seq,
           c.event_id AS condensation_event_id,
           c.summary,
           c.summary_offset,
           f.event_id AS forgotten_event_id,
           f.was_in_view,
           fe.seq AS forgotten_seq,
           fe.kind AS forgotten_kind
    FROM condensations c
    LEFT JOIN condensation_forgotten f
           ON f.conversation_id = c.conversation_id AND f.seq = c.seq
    LEFT JOIN events fe
           ON fe.conversation_id = f.conversation_id AND fe.event_id = f.event_id
"""


def replace(conn: sa.Connection, make: Callable[[], None], *, legacy: bool | None) -> None:
    """Run ``make`` (which leaves ``condensation_forgotten`` a table or gone) with
    ``condensation_log`` dropped around it, then make the view ``condensation_forgotten``
    (``legacy``: over the old rows too; None: ``make`` made the table) and the log again, each
    with the SELECT grants it had."""
    grants = {name: select_grants(conn, name) for name in (VIEW, LOG)}
    conn.exec_driver_sql(f"DROP VIEW IF EXISTS {LOG}")
    make()
    if legacy is not None:
        conn.exec_driver_sql(view_sql(conn.dialect.name, legacy=legacy))
    conn.exec_driver_sql(_LOG_SQL)
    for name, grantees in grants.items():
        for grantee in grantees:
            conn.exec_driver_sql(f"GRANT SELECT ON {name} TO {grantee}")


def finish(conn: sa.Connection) -> None:
    """The emptied old table dropped and the view made over the payloads alone: one
    transaction."""

    def drop() -> None:
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {VIEW}")
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {LEGACY}")

    replace(conn, drop, legacy=False)


def _has_not_in_view(conn: sa.Connection) -> bool:
    return "not_in_view" in {
        column["name"] for column in sa.inspect(conn).get_columns("condensations")
    }


def add_not_in_view(conn: sa.Connection) -> None:
    """``condensations.not_in_view``, where it is missing: revision 0024's column, which
    revisions 0022 and 0023 add in their instant DDL too. This code writes it with every
    condensation, and an append made while their batches run must be accepted (issue 37:
    each one failed, "the viewstore schema is missing or outdated"). The table stays as it is
    until revision 0024: such an append writes no row of it (nor did this code), and the view
    revision 0024 makes shows its condensations from their payloads (``view_sql``: their
    ``not_in_view`` is set)."""
    if not _has_not_in_view(conn):
        conn.exec_driver_sql("ALTER TABLE condensations ADD COLUMN not_in_view TEXT")


def drop_not_in_view(conn: sa.Connection) -> None:
    """Undo ``add_not_in_view`` on a store taken below revision 0022, whose
    ``condensation_forgotten`` is still the table: the condensations an append gave their
    ``not_in_view`` (and no rows of the table) get their rows from their payloads first, as
    the code before revision 0024 wrote them, then the column goes."""
    if not _has_not_in_view(conn):
        return
    written = _FROM_PAYLOADS[conn.dialect.name].format(moved="AND c.not_in_view IS NOT NULL")
    conn.exec_driver_sql(
        f"INSERT INTO {VIEW} (conversation_id, seq, event_id, was_in_view) "
        f"SELECT w.conversation_id, w.seq, w.event_id, w.was_in_view FROM ({written}) AS w "
        f"WHERE NOT EXISTS (SELECT 1 FROM {VIEW} f "
        "WHERE f.conversation_id = w.conversation_id AND f.seq = w.seq)"
    )
    conn.exec_driver_sql("ALTER TABLE condensations DROP COLUMN not_in_view")
