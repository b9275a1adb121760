"""A store's schema and rows as plain data, to compare two ways of building a store.

Everything a store's behaviour depends on is read from the database's own catalogue: tables
and their columns in order (type, nullability, default, collation), constraints, indexes
(partial ones with their predicate), triggers, functions, views, sequences, the privileges of
viewstore's roles, partitioning, and the rows of every table. Names that differ between two
databases by construction (the database's name inside the role names, the PostgreSQL schema)
are replaced by placeholders, and SQL text has its whitespace collapsed.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Connection, text

Snapshot = dict[str, Any]


def _squeeze(sql: str | None) -> str | None:
    return None if sql is None else " ".join(sql.replace("\n", " ").split())


def snapshot(conn: Connection, schema: str | None = None) -> Snapshot:
    if conn.dialect.name == "sqlite":
        return _sqlite(conn)
    return _postgresql(conn, schema or "public")


def _rows(conn: Connection, tables: list[str], prefix: str = "") -> dict[str, list[list[Any]]]:
    found = {}
    for table in tables:
        rows = conn.execute(text(f'SELECT * FROM {prefix}"{table}"')).all()
        found[table] = sorted([repr(value) for value in row] for row in rows)
    return found


def _sqlite(conn: Connection) -> Snapshot:
    objects = conn.execute(
        text("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
    ).all()
    tables = [o.name for o in objects if o.type == "table" and not o.name.startswith("sqlite_")]
    shot: Snapshot = {"tables": {}, "triggers": {}, "views": {}}
    for table in tables:
        columns = [list(c) for c in conn.execute(text(f'PRAGMA table_xinfo("{table}")'))]
        keys = [list(k) for k in conn.execute(text(f'PRAGMA foreign_key_list("{table}")'))]
        indexes = {}
        for index in conn.execute(text(f'PRAGMA index_list("{table}")')).all():
            parts = [list(p) for p in conn.execute(text(f'PRAGMA index_xinfo("{index.name}")'))]
            sql = next((o.sql for o in objects if o.name == index.name), None)
            where = None if sql is None or " WHERE " not in sql else sql.split(" WHERE ", 1)[1]
            # An automatic index (a UNIQUE or PRIMARY KEY constraint) is named by position.
            name = index.name if not index.name.startswith("sqlite_autoindex") else index.origin
            indexes[f"{name}:{parts}"] = [
                index.unique,
                index.origin,
                index.partial,
                _squeeze(where),
            ]
        shot["tables"][table] = {"columns": columns, "foreign_keys": keys, "indexes": indexes}
    for o in objects:
        if o.type in ("trigger", "view"):
            shot[f"{o.type}s"][o.name] = [o.tbl_name, _squeeze(o.sql)]
    shot["rows"] = _rows(conn, tables)
    return shot


_CATALOGUE = {
    "columns": """
        SELECT c.relname, c.reloptions,
               rank() OVER (PARTITION BY c.oid ORDER BY a.attnum), a.attname,
               format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), co.collname, a.attstorage, a.attcompression
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 100
        WHERE n.nspname = :s AND c.relkind IN ('r', 'p', 'v') AND a.attnum > 0
          AND NOT a.attisdropped
    """,
    "constraints": """
        SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = :s
    """,
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = :s",
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = :s AND NOT t.tgisinternal
    """,
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = :s
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
    """,
    "views": "SELECT viewname, definition FROM pg_views WHERE schemaname = :s",
    "sequences": """
        SELECT sequencename, data_type::text, start_value, increment_by
        FROM pg_sequences WHERE schemaname = :s
    """,
    "partitions": """
        SELECT c.relname, p.partstrat, p.partnatts,
               (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid)
        FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = :s
    """,
    "privileges": """
        SELECT c.relname, g.grantee, g.privilege_type
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
             LATERAL (SELECT r.rolname AS grantee, x.privilege_type
                      FROM aclexplode(c.relacl) x JOIN pg_roles r ON r.oid = x.grantee) g
        WHERE n.nspname = :s AND g.grantee LIKE 'viewstore%'
    """,
    "schema_privileges": """
        SELECT r.rolname, x.privilege_type
        FROM pg_namespace n, aclexplode(n.nspacl) x JOIN pg_roles r ON r.oid = x.grantee
        WHERE n.nspname = :s AND r.rolname LIKE 'viewstore%'
    """,
    "database_privileges": """
        SELECT r.rolname, x.privilege_type
        FROM pg_database d, aclexplode(d.datacl) x JOIN pg_roles r ON r.oid = x.grantee
        WHERE d.datname = current_database() AND r.rolname LIKE 'viewstore%'
    """,
    "function_privileges": """
        SELECT p.proname, r.rolname, x.privilege_type
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,
             aclexplode(p.proacl) x JOIN pg_roles r ON r.oid = x.grantee
        WHERE n.nspname = :s AND r.rolname LIKE 'viewstore%'
    """,
}


def _postgresql(conn: Connection, schema: str) -> Snapshot:
    database = conn.execute(text("SELECT current_database()")).scalar_one()

    def plain(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        value = value.replace(database, "<database>")
        value = re.sub(rf"\b{re.escape(schema)}\b", "<schema>", value)
        return _squeeze(value)

    shot: Snapshot = {}
    for part, query in _CATALOGUE.items():
        rows = conn.execute(text(query), {"s": schema}).all()
        shot[part] = sorted([plain(value) for value in row] for row in rows)
    tables = conn.execute(
        text(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = :s AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        ),
        {"s": schema},
    )
    shot["rows"] = _rows(conn, sorted(t for (t,) in tables), f'"{schema}".')
    return shot
