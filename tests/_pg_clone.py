"""Stores at head for PostgreSQL tests, cloned from a template migrated once per test process.

Migrating a new database to head runs every revision (about 0.5 s on an idle 2-core machine,
two to four times that under the suite's load); ``CREATE DATABASE ... TEMPLATE`` copies a
migrated one in some 60 ms. A clone is the template byte for byte except for one thing:
viewstore's roles are named after their database (viewstore/store/database/roles.py), and the
template's grants name the template's roles. ``adopt_roles`` gives the clone roles of its own,
grants them exactly what the template's roles hold in it, and takes the template's roles out
of it, so that the clone is what migrating it would have made. tests/store/test_test_stores.py
compares the two, grant by grant.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from viewstore.store.database.roles import role_names

# Every ACL entry a role holds inside the current database, as a GRANT's object clause: the
# kinds of objects migrations grant on (tables, views, sequences, columns, schemas, functions).
_ACL_ENTRIES = """
SELECT CASE WHEN c.relkind = 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END || c.oid::regclass::text,
       NULL::text, a.privilege_type, a.is_grantable, r.rolname
FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE r.rolname = ANY(:roles)
UNION ALL
SELECT 'TABLE ' || c.oid::regclass::text, quote_ident(t.attname), a.privilege_type,
       a.is_grantable, r.rolname
FROM pg_attribute t JOIN pg_class c ON c.oid = t.attrelid
CROSS JOIN LATERAL aclexplode(t.attacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE r.rolname = ANY(:roles)
UNION ALL
SELECT 'SCHEMA ' || quote_ident(n.nspname), NULL, a.privilege_type, a.is_grantable, r.rolname
FROM pg_namespace n CROSS JOIN LATERAL aclexplode(n.nspacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE r.rolname = ANY(:roles)
UNION ALL
SELECT 'FUNCTION ' || p.oid::regprocedure::text, NULL, a.privilege_type, a.is_grantable,
       r.rolname
FROM pg_proc p CROSS JOIN LATERAL aclexplode(p.proacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE r.rolname = ANY(:roles)
UNION ALL
SELECT 'DATABASE ' || quote_ident(d.datname), NULL, a.privilege_type, a.is_grantable, r.rolname
FROM pg_database d CROSS JOIN LATERAL aclexplode(d.datacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE d.datname = :database AND r.rolname = ANY(:roles)
"""

Grant = tuple[str, str | None, str, bool, str]  # object, column, privilege, grantable, role


def grants(conn: Connection, roles: list[str], database: str | None = None) -> set[Grant]:
    """Every privilege ``roles`` hold in the database ``conn`` is on, and on the database
    ``database`` (by default that one) itself."""
    if database is None:
        database = str(conn.execute(text("SELECT current_database()")).scalar_one())
    rows = conn.execute(text(_ACL_ENTRIES), {"roles": roles, "database": database}).all()
    return {
        (obj, column, privilege, bool(grantable), role)
        for obj, column, privilege, grantable, role in rows
    }


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def adopt_roles(conn: Connection, template: str, clone: str) -> None:
    """Hand what the template's roles hold in the clone (``conn``, a superuser's) to roles named
    after the clone, as migration 0008 names them, created if need be. One round trip for all
    the statements: some ninety of them, on every PostgreSQL test's setup."""
    old, new = role_names(template), role_names(clone)
    # The template's database ACL, not the clone's: CREATE DATABASE does not copy it.
    held = grants(conn, list(old.values()), database=template)
    script = [
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '"
        + role.replace("'", "''")
        + f"') THEN CREATE ROLE {_quote(role)} NOLOGIN; END IF; END $$"
        for role in new.values()
    ]
    by_role = {old[kind]: new[kind] for kind in old}
    for obj, column, privilege, grantable, role in sorted(held, key=str):
        option = " WITH GRANT OPTION" if grantable else ""
        if obj.startswith("DATABASE "):
            script.append(
                f"GRANT {privilege} ON DATABASE {_quote(clone)} TO {_quote(by_role[role])}{option}"
            )
            continue
        what = f"{privilege} ({column})" if column else privilege
        script.append(f"GRANT {what} ON {obj} TO {_quote(by_role[role])}{option}")
        script.append(f"REVOKE {what} ON {obj} FROM {_quote(role)} CASCADE")
    conn.exec_driver_sql(";\n".join(script))


__all__ = ["Grant", "adopt_roles", "grants"]
