"""Migrations: upgrade from empty, no drift from the models, downgrade to base and back, one
head, the real ``alembic`` command line, and the append-only guard on the events table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import exc, inspect, text

from viewstore import EventStore
from viewstore.store.database.migrate import VERSION_TABLE
from viewstore.store.database.schema import compared_on, metadata
from viewstore.store.event_store import alembic_config

from ..store._helpers import S, U

REPO = Path(__file__).resolve().parents[2]
TABLES = set(metadata.tables)


def drift(store: EventStore) -> list[object]:
    with store.engine.connect() as conn:
        opts = {
            "compare_type": True,
            "include_object": compared_on(conn.dialect.name),
            "version_table": VERSION_TABLE,
        }
        context = MigrationContext.configure(conn, opts=opts)
        diffs: list[object] = compare_metadata(context, metadata)
        return diffs


def upgrade(store: EventStore, revision: str = "head") -> None:
    with store.engine.connect() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        conn.commit()


def downgrade(store: EventStore, revision: str = "base") -> None:
    with store.engine.connect() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, revision)
        conn.commit()


def viewstore_objects(store: EventStore) -> set[str]:
    """Tables, SQL views and sequences; alembic keeps its own (emptied) version table."""
    inspector = inspect(store.engine)
    names = set(inspector.get_table_names()) - {"viewstore_alembic_version"}
    names |= set(inspector.get_view_names())
    if store.engine.dialect.supports_sequences:
        names |= set(inspector.get_sequence_names())
    return names


def test_upgrade_from_empty_has_no_drift(empty_db_url: str) -> None:
    with EventStore(empty_db_url) as store:
        assert inspect(store.engine).get_table_names() == []
        store.create_schema()
        assert set(inspect(store.engine).get_table_names()) >= TABLES
        assert drift(store) == []
        store.create_schema()  # idempotent: already at head
        assert drift(store) == []


def test_downgrade_to_base_and_upgrade_again(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        store.append("c", [S(), U("u1")])
        downgrade(store)
        assert viewstore_objects(store) == set()
        with store.engine.connect() as conn:
            version_rows = text("SELECT count(*) FROM viewstore_alembic_version")
            assert conn.execute(version_rows).scalar_one() == 0
        upgrade(store)
        assert drift(store) == []
        assert store.conversation_ids() == []
        assert store.append("c", [S(), U("u1")]).version == 2
        assert store.verify().ok


def test_single_head() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    heads = script.get_heads()
    assert len(heads) == 1, heads
    # The chain from base to head is linear (no branch points, no merges).
    revisions = list(script.walk_revisions("base", "heads"))
    assert all(not isinstance(r.down_revision, tuple) for r in revisions)
    assert revisions[-1].down_revision is None


def test_alembic_command_line_from_the_repo_root(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    env = {**os.environ, "VIEWSTORE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with EventStore(url) as store:
        assert set(inspect(store.engine).get_table_names()) >= TABLES
        assert drift(store) == []
        assert store.append("c", S()).version == 1
    check = subprocess.run(
        [sys.executable, "-m", "alembic", "check"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


TAMPERING = [
    "UPDATE events SET payload = '{}' WHERE seq = 1",
    "UPDATE events SET kind = kind",
    "DELETE FROM events WHERE seq = 2",
    "DELETE FROM events",
]


def test_events_table_is_append_only(store: EventStore) -> None:
    store.append("c", [S(), U("u1")])
    for statement in TAMPERING:
        with pytest.raises(exc.DBAPIError, match="append-only"), store.engine.begin() as conn:
            conn.execute(text(statement))
    assert [e.payload for e in store.events("c")] == [S(), U("u1")]
    assert store.verify().ok
