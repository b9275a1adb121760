"""``EventStore(engine)``: an engine made by ``viewstore.create_engine`` carries the settings the
store relies on; an engine made elsewhere that lacks them is refused, never silently used."""

from __future__ import annotations

import pytest
import sqlalchemy
from sqlalchemy import text

from viewstore import EventStore, InvalidArgumentError, create_engine

from ._helpers import S, U


def test_a_plain_sqlite_engine_is_refused(sqlite_url: str) -> None:
    engine = sqlalchemy.create_engine(sqlite_url)
    with pytest.raises(InvalidArgumentError, match=r"viewstore\.create_engine"):
        EventStore(engine)
    engine.dispose()


def test_viewstore_create_engine_gives_a_sqlite_engine_with_the_store_settings(
    sqlite_url: str,
) -> None:
    engine = create_engine(sqlite_url, pool_size=3)
    try:
        with engine.connect() as conn:
            pragmas = [
                conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in ("journal_mode", "busy_timeout", "foreign_keys")
            ]
        assert pragmas == ["wal", 30_000, 1]
        store = EventStore(engine)
        store.create_schema()
        assert store.append("c", [S(), U("u1")]).version == 2
        store.close()  # the store does not own the engine: it stays usable
        assert EventStore(engine.execution_options(logging_token="x")).version("c") == 2
        engine.dispose()
        assert EventStore(engine).view("c").event_ids == ["S", "u1"]
    finally:
        engine.dispose()


def test_a_schema_on_sqlite_is_refused(sqlite_url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="PostgreSQL"):
        EventStore(sqlite_url, schema="viewstore")
    engine = create_engine(sqlite_url)
    with pytest.raises(InvalidArgumentError, match="PostgreSQL"):
        EventStore(engine, schema="viewstore")
    engine.dispose()


@pytest.mark.parametrize("name", ["Viewstore", "view store", "x; DROP TABLE t", "", "1abc"])
def test_a_schema_name_must_be_a_plain_identifier(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="lower-case SQL identifier"):
        EventStore("postgresql://u@127.0.0.1/db", schema=name)  # checked before connecting


@pytest.mark.postgres
def test_a_postgres_engine_must_be_made_for_the_schema_asked(fresh_pg_url: str) -> None:
    plain = sqlalchemy.create_engine(fresh_pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with EventStore(plain) as store:  # the default schema needs nothing of the engine
        store.create_schema()
        assert store.append("c", S()).version == 1
    with pytest.raises(InvalidArgumentError, match="schema 'viewstore'"):
        EventStore(plain, schema="viewstore")
    plain.dispose()
    engine = create_engine(fresh_pg_url, schema="viewstore")
    try:
        with pytest.raises(InvalidArgumentError, match="schema None"):
            EventStore(engine)
        with EventStore(engine, schema="viewstore") as store:
            store.create_schema()
            store.append("c", [S(), U("in-schema")])
            with engine.connect() as conn:
                conn.execute(text("RESET ALL"))  # as a pooler would: the path stays
                assert conn.execute(text("SHOW search_path")).scalar() == "viewstore"
            assert store.view("c").event_ids == ["S", "in-schema"]
    finally:
        engine.dispose()
