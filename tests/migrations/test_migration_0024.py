"""Migration 0024 turns ``condensation_forgotten`` into a view of the condensations' payloads
and ``condensations.not_in_view``, online and resumably. Taken down to 0023 (whose downgrade
makes the table again from the view), a store holding condensations that list ids in the view,
ids not in it and ids listed twice, migrated again, equals one built fresh at head: the same
rows through the view, the same condensations rows, reads, analyst views, grants and verify.
A migration killed half way (SQLite, a real SIGKILL of the migrating process), with a
condensation appended meanwhile, finishes when run again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from viewstore import EventStore
from viewstore.store.database.forgotten import LEGACY

from ..store._helpers import LAYOUTS, A, C, O, S, U
from ._migrating import forgotten_rows, kill_half_way, migrated_and_fresh, stamped
from .test_migration_0022 import assert_equal_stores, fill
from .test_migrations import downgrade, drift

REPO = Path(__file__).resolve().parents[2]


def condensing(store: EventStore, key: str, rounds: int) -> None:
    """``rounds`` condensations, each forgetting its own pair, an id never stored and, twice
    over, an id an earlier one forgot already."""
    store.append(key, [S(), U("u")])
    for i in range(rounds):
        earlier = f"a{i - 1}" if i else "u"
        forget = [f"a{i}", f"o{i}", f"ghost{i}", earlier, earlier]
        store.append(key, [A(f"a{i}", f"t{i}", f"r{i}"), O(f"o{i}", f"t{i}"), C(f"c{i}", forget)])


def condensation_rows(store: EventStore) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        found = conn.execute(text("SELECT * FROM condensations ORDER BY conversation_id, seq"))
        return [tuple(row) for row in found]


def reader_grants(store: EventStore) -> set[tuple[str, str]]:
    if store.engine.dialect.name != "postgresql":
        return set()
    with store.engine.connect() as conn:
        found = conn.execute(
            text(
                "SELECT a.grantee::regrole::text, a.privilege_type FROM pg_class c "
                "CROSS JOIN LATERAL aclexplode(c.relacl) a "
                "WHERE c.relname = 'condensation_forgotten' AND a.grantee <> c.relowner "
                "AND a.privilege_type = 'SELECT'"
            )
        )
        return {(str(role), str(what)) for role, what in found}


def populate(store: EventStore, rounds: int = 12) -> None:
    fill(store)
    condensing(store, "condensing", rounds)


def assert_same(migrated: EventStore, fresh: EventStore) -> None:
    assert forgotten_rows(migrated) == forgotten_rows(fresh)
    assert condensation_rows(migrated) == condensation_rows(fresh)
    for key in fresh.conversation_ids():
        assert migrated.condensations(key) == fresh.condensations(key)
    assert_equal_stores(migrated, fresh)
    assert LEGACY not in inspect(migrated.engine).get_table_names()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_migrated_store_equals_a_fresh_one(
    request: pytest.FixtureRequest, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, partitions, fresh_url = migrated_and_fresh(request, layout)
    monkeypatch.setenv("VIEWSTORE_MIGRATION_BATCH", "3")
    with EventStore(url) as migrated, EventStore(fresh_url) as fresh:
        migrated.create_schema(partitions=partitions)
        populate(migrated)
        rows = forgotten_rows(migrated)
        assert {w for *_, w in rows} == {True, False}
        granted = reader_grants(migrated)
        assert granted or layout == "sqlite"  # 0009's reader may read it
        downgrade(migrated, "0023")
        assert "condensation_forgotten" in inspect(migrated.engine).get_table_names()
        assert forgotten_rows(migrated) == rows  # the table again, as 0023 kept it
        migrated.create_schema()
        assert reader_grants(migrated) == granted
        fresh.create_schema(partitions=partitions)
        populate(fresh)
        assert_same(migrated, fresh)
        if partitions is None:
            assert drift(migrated) == []


_MOVED = "SELECT count(*) FROM condensations WHERE not_in_view IS NOT NULL"
_MEANWHILE = [A("am", "tm", "rm"), O("om", "tm"), C("cm", ["am", "ghost-m"])]


def test_a_killed_migration_finishes_when_run_again(tmp_path: Path) -> None:
    url, fresh_url = f"sqlite:///{tmp_path}/killed.db", f"sqlite:///{tmp_path}/fresh.db"
    with EventStore(url) as migrated:
        migrated.create_schema()
        populate(migrated, rounds=600)
        downgrade(migrated, "0023")
        kill_half_way(migrated, url, _MOVED, 50, lambda: migrated.append("condensing", _MEANWHILE))
        with migrated.engine.connect() as conn:
            left = conn.execute(text(f"SELECT count(*) FROM {LEGACY}")).scalar_one()
        assert left > 0 and stamped(migrated) == "0023"  # killed half way
        assert migrated.verify().ok  # read half migrated: the view spans both
        assert migrated.condensations("condensing")[-1].forgotten == (
            ("am", True),
            ("ghost-m", False),
        )
        migrated.create_schema()
        with EventStore(fresh_url) as fresh:
            fresh.create_schema()
            populate(fresh, rounds=600)
            fresh.append("condensing", _MEANWHILE)
            assert_same(migrated, fresh)
