"""``viewstore init --partitions N``: a new PostgreSQL store whose tables are hash-partitioned
by conversation, with everything else as on a plain store. (The store's own suites also run
on this layout: the modules that set PARTITIONED_TOO, see tests/conftest.py.)"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Connection, text

from viewstore import EventStore, InvalidArgumentError, UnsupportedDatabaseError
from viewstore.store.distribution import server_append
from viewstore.store.distribution.partitions import APPEND_ONLY, TABLES

from ..cli._process import error_line, run
from ..ops._helpers import condensed_history, message

ON_POSTGRES = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)


def _catalog(conn: Connection, query: str) -> list[tuple[object, ...]]:
    return [tuple(row) for row in conn.execute(text(query), {"t": list(TABLES)})]


def _role(grantee: object) -> str:
    """The kind of a database's role (its name carries the database's)."""
    return re.sub(r"^viewstore_(reader|writer)_.*$", r"\1", str(grantee))


def _shape(conn: Connection) -> dict[str, list[tuple[object, ...]]]:
    """Everything of the tables but their partitions: columns, keys, indexes, foreign keys,
    triggers, views and grants."""
    on_tables = "relname = ANY(:t)"
    return {
        "columns": _catalog(
            conn,
            "SELECT table_name, column_name, data_type, is_nullable, column_default, "
            "collation_name FROM information_schema.columns WHERE table_name = ANY(:t) "
            "ORDER BY 1, 2",
        ),
        "constraints": _catalog(
            conn,
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
            "FROM pg_constraint WHERE conrelid::regclass::text = ANY(:t) AND conparentid = 0 "
            "ORDER BY 1, 2",
        ),
        "indexes": _catalog(
            conn,
            "SELECT tablename, indexname FROM pg_indexes WHERE tablename = ANY(:t) ORDER BY 1, 2",
        ),
        "triggers": _catalog(
            conn,
            "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            f"WHERE NOT t.tgisinternal AND c.{on_tables} ORDER BY 1, 2",
        ),
        "views": _catalog(
            conn, "SELECT viewname FROM pg_views WHERE schemaname = current_schema() ORDER BY 1"
        ),
        "grants": sorted(
            (table, _role(grantee), privilege)
            for table, grantee, privilege in _catalog(
                conn,
                "SELECT table_name, grantee, privilege_type "
                "FROM information_schema.role_table_grants "
                "WHERE (table_name = ANY(:t) OR table_name IN "
                "('attention_window', 'condensation_log', 'view_history')) "
                "AND grantee <> current_user",
            )
        ),
    }


@ON_POSTGRES
@pytest.mark.postgres
def test_a_partitioned_store_has_the_plain_stores_shape(db_url: str, second_pg_url: str) -> None:
    with EventStore(db_url) as plain, EventStore(second_pg_url) as split:
        plain.create_schema()
        split.create_schema(partitions=4)
        with plain.engine.connect() as a, split.engine.connect() as b:
            expected, found = _shape(a), _shape(b)
            for part, rows in expected.items():
                assert found[part] == rows, part
            guards = b.execute(
                text(
                    "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c "
                    "ON c.oid = t.tgrelid WHERE t.tgname LIKE '%no_truncate' ORDER BY 1"
                )
            ).all()
            assert sorted(map(tuple, guards)) == sorted(
                [(table, f"{table}_no_truncate") for table in APPEND_ONLY]
                + [
                    (f"{table}_p{i}", f"{table}_p{i}_no_truncate")
                    for table in APPEND_ONLY
                    for i in range(4)
                ]
            )
            partitions = b.execute(
                text(
                    "SELECT p.relname, count(*) FROM pg_inherits i JOIN pg_class p "
                    "ON p.oid = i.inhparent JOIN pg_class c ON c.oid = i.inhrelid "
                    "WHERE c.relkind = 'r' GROUP BY 1 ORDER BY 1"
                )
            ).all()
            assert dict(partitions) == dict.fromkeys(sorted(TABLES), 4)


@ON_POSTGRES
@pytest.mark.postgres
def test_the_fast_path_calls_the_function_on_plain_tables_and_not_on_partitions(
    db_url: str, second_pg_url: str
) -> None:
    """As docs/tutorial-postgresql.md says: one call of ``viewstore_append_rows`` on plain
    tables, the single statement on partitioned ones (docs/distribution.md has the
    measurements)."""
    with EventStore(db_url) as plain, EventStore(second_pg_url) as split:
        plain.create_schema()
        split.create_schema(partitions=4)
        assert server_append.available(plain.engine)
        assert not server_append.available(split.engine)
        for store in (plain, split):  # each layout's fast path writes, whichever it takes
            store.append("c", [message("m1")])
            store.append("c", [message("m2")])
            assert [e.event_id for e in store.events("c")] == ["m1", "m2"]
            assert store.verify("c").ok


@pytest.mark.postgres
def test_each_partition_of_the_log_refuses_what_the_log_refuses(fresh_pg_url: str) -> None:
    with EventStore(fresh_pg_url) as store:
        store.create_schema(partitions=3)
        for i in range(12):
            store.append(f"c{i}", condensed_history())
        with store.engine.connect() as conn:
            parts = (
                conn.execute(text("SELECT count(*) FROM events_p0"), {}).scalar_one(),
                conn.execute(text("SELECT count(*) FROM events_p1")).scalar_one(),
            )
        assert all(parts)  # conversations are spread over the partitions
        for statement in (
            "TRUNCATE events_p0 CASCADE",
            "TRUNCATE events CASCADE",
            "DELETE FROM events_p1",
            "UPDATE events_p2 SET payload = '{}'",
            "TRUNCATE tombstones_p0",
            "TRUNCATE redactions_p1",
        ):
            with store.engine.begin() as conn, pytest.raises(Exception, match="append-only"):
                conn.execute(text(statement))
        assert store.verify().ok
        assert store.version("c0") == len(condensed_history())
        with store.engine.connect() as conn:
            window = conn.execute(
                text("SELECT count(*) FROM attention_window WHERE conversation_id = 'c3'")
            ).scalar_one()
        assert window == len(store.view("c3").event_ids)


@ON_POSTGRES
@pytest.mark.postgres
def test_init_partitions_is_for_new_stores_only(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [message("m1")])
        with pytest.raises(InvalidArgumentError, match="new store"):
            store.create_schema(partitions=4)
        assert store.version("c") == 1


@pytest.mark.postgres
def test_init_partitions_again_is_a_no_op_and_another_count_is_refused(fresh_pg_url: str) -> None:
    with EventStore(fresh_pg_url) as store:
        store.create_schema(partitions=2)
        store.append("c", [message("m1")])
        store.create_schema(partitions=2)
        store.create_schema()
        with pytest.raises(InvalidArgumentError, match="2 partitions"):
            store.create_schema(partitions=3)
        assert store.version("c") == 1


@pytest.mark.parametrize("count", [0, -1, 1025, True, "4"])
def test_a_bad_partition_count_is_refused(sqlite_url: str, count: object) -> None:
    with EventStore(sqlite_url) as store, pytest.raises(InvalidArgumentError):
        store.create_schema(partitions=count)  # type: ignore[arg-type]


def test_sqlite_has_no_partitions(sqlite_url: str) -> None:
    with EventStore(sqlite_url) as store:
        with pytest.raises(UnsupportedDatabaseError):
            store.create_schema(partitions=4)
        assert store.schema_revision() is None  # nothing was created


@pytest.mark.postgres
def test_the_init_command_partitions(fresh_pg_url: str) -> None:
    done = run("init", "--partitions", "2", "--json", url=fresh_pg_url)
    assert done.returncode == 0, done.stderr
    with EventStore(fresh_pg_url) as store, store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE c.relkind = 'r'"
            )
        ).scalar_one()
        assert found == 2 * len(TABLES)
    assert "new store" in error_line(run("init", "--partitions", "3", url=fresh_pg_url))


def test_the_init_command_says_sqlite_has_no_partitions(sqlite_url: str) -> None:
    assert "PostgreSQL" in error_line(run("init", "--partitions", "2", url=sqlite_url))
