"""viewstore on a real Citus cluster (a coordinator and workers; VIEWSTORE_TEST_CITUS_URL names
the coordinator's database, which has the citus extension and its workers added).

Each test starts from a store created on the coordinator and distributed by
``EventStore.citus_distribute()``: the feed probe of the ops suite (writers, a late committer,
a reader) with the per-node feed, the reference vectors through the ordinary append path, the
server-side append run on the workers, forks, redaction and erasure, verify against a
checkpoint, and the reader role. Deselected where no cluster is given (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from viewstore import EventStore
from viewstore.store.database.engine import normalize_url
from viewstore.store.database.roles import role_names
from viewstore.store.distribution.partitions import TABLES

from ..cli import _readme as readme
from ..conftest import CITUS_URL_ENV
from ..store._helpers import load_vectors, triple, view_digest
from ..store.test_roles import as_login, login_in
from . import test_feed
from ._helpers import condensed_history, message

pytestmark = pytest.mark.citus

_RESET = [  # every table of the database's public schema (the store's, and an example's own)
    "DROP VIEW IF EXISTS attention_window, condensation_log, view_history CASCADE",
    "DO $$ DECLARE t record; BEGIN FOR t IN SELECT tablename FROM pg_tables "
    "WHERE schemaname = 'public' LOOP "
    "EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', t.tablename); END LOOP; END $$",
    "DO $$ DECLARE f record; BEGIN FOR f IN SELECT oid::regprocedure AS sig FROM pg_proc "
    "WHERE proname LIKE 'viewstore\\_%' LOOP EXECUTE 'DROP FUNCTION ' || f.sig || ' CASCADE'; "
    "END LOOP; END $$",
    "DROP SEQUENCE IF EXISTS events_position_seq",
]


def _reset_and_distribute(url: str) -> None:
    admin = create_engine(normalize_url(url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        for statement in _RESET:
            conn.execute(text(statement))
    admin.dispose()
    with EventStore(url) as store:
        store.create_schema()
        store.citus_distribute()


@pytest.fixture
def citus_url() -> Iterator[str]:
    url = os.environ[CITUS_URL_ENV]
    _reset_and_distribute(url)
    yield url


def test_every_table_and_the_append_function_are_distributed(citus_url: str) -> None:
    with EventStore(citus_url) as store, store.engine.connect() as conn:
        tables = conn.execute(
            text("SELECT logicalrelid::text FROM pg_dist_partition ORDER BY 1")
        ).scalars()
        assert set(tables) == set(TABLES)
        groups = conn.execute(text("SELECT DISTINCT colocationid FROM pg_dist_partition"))
        assert len(groups.all()) == 1  # one conversation's rows of every table share a shard
        function = conn.execute(
            text(
                "SELECT count(*) FROM pg_dist_object "
                "WHERE objid = 'viewstore_append_rows'::regproc::oid"
            )
        )
        assert function.scalar_one() == 1


def test_the_feed_probe_misses_and_repeats_nothing(
    citus_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    test_feed.test_feed_tail_misses_and_repeats_nothing(citus_url, capsys)
    with EventStore(citus_url) as store:
        cursor = store.feed(limit=1)[0].cursor
        assert cursor.count("=") >= 2  # one position per node
        assert store.verify().ok


def test_reference_vectors_on_the_ordinary_path(citus_url: str, vectors_dir: Path) -> None:
    vectors = load_vectors(vectors_dir, "micro")[::4] + load_vectors(vectors_dir, "cases")[::25]
    with EventStore(citus_url, fast_path=False) as store:
        for vector in [v for v in vectors if v.lines]:
            for start in range(0, len(vector.lines), 150):
                store.append(vector.name, vector.lines[start : start + 150])
            live = vector.expected["incremental"]
            assert triple(store.view(vector.name)) == (
                live["view_ids"],
                live["manipulation_indices"],
                live["unhandled_condensation_request"],
            ), vector.name
            half = len(vector.lines) // 2 or 1
            digest = vector.expected["prefix_digests"][half - 1]
            assert view_digest(store.view(vector.name, as_of=half)) == digest, vector.name
            assert store.append(vector.name, vector.lines[0]).duplicates  # a resend
        report = store.verify()
        assert report.ok, report.problems[:5]


def test_the_server_side_append_runs_on_the_workers(citus_url: str) -> None:
    with EventStore(citus_url) as store:  # the fast path: one call of viewstore_append_rows
        store.append("c", condensed_history())
        for i in range(30):
            store.append("c", [message(f"x{i}")])
        assert store.version("c") == len(condensed_history()) + 30
        assert store.view("c").event_ids[-1] == "x29"
        assert store.verify("c").ok


def test_forks_redaction_erasure_and_a_checkpoint(citus_url: str) -> None:
    with EventStore(citus_url, fast_path=False) as store:
        for name in ("a", "b", "c"):
            store.append(name, condensed_history())
        checkpoint = store.checkpoint()
        store.fork("a", 4, "a-fork")
        store.append("a-fork", [message("af1")])
        assert store.view("a-fork").event_ids[-1] == "af1"
        assert [e.event_id for e in store.events("a-fork")][:4] == [
            e.event_id for e in store.events("a")
        ][:4]
        store.redact("b", condensed_history()[0]["id"], reason="citus")
        store.erase("c", reason="citus")
        report = store.verify(against=checkpoint)
        assert report.ok, report.problems
        assert any("erased" in note for r in report.conversations for note in r.notes)
        assert json.loads(json.dumps(checkpoint))  # a checkpoint is plain JSON


def test_the_reader_reads_the_analyst_views(citus_url: str) -> None:
    with EventStore(citus_url, fast_path=False) as store:
        store.append("c", condensed_history())
        database = store.engine.url.database or ""
    with login_in(citus_url, role_names(database)["reader"]) as login:
        engine = create_engine(normalize_url(as_login(citus_url, login)))
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT count(*) FROM attention_window WHERE conversation_id = 'c'")
            ).scalar_one()
        engine.dispose()
    assert rows > 0


def test_a_fork_without_an_id_lands_on_its_sources_shard(citus_url: str) -> None:
    """So its family shares one shard: reading a fork's shared prefix is single-shard, and a
    shard move takes the family together."""
    shard = "SELECT get_shard_id_for_distribution_column('conversations', CAST(:c AS text))"
    with EventStore(citus_url, fast_path=False) as store:
        store.append("root", condensed_history())
        child = store.fork("root", 5)
        store.append(child, [message("c1")])
        grandchild = store.fork(child, 6)
        named = store.fork("root", 3, "chosen-id")
        with store.engine.connect() as conn:
            shards = {
                key: conn.execute(text(shard), {"c": key}).scalar_one()
                for key in ("root", child, grandchild, named)
            }
        assert shards["root"] == shards[child] == shards[grandchild]
        assert len(child) == len(grandchild) == 32
        assert store.fork_origin(grandchild).family_id == "root"  # type: ignore[union-attr]
        assert store.verify().ok


def test_the_readmes_python_examples_pass_on_citus(citus_url: str, tmp_path: Path) -> None:
    """Every Python example of the README and the docs pages, its SQLite URL replaced by the
    cluster's, each on a freshly distributed store."""
    examples = [block for block in readme.blocks() if block.kind == "python"]
    assert examples
    for block in examples:
        _reset_and_distribute(citus_url)
        code = re.sub(r"sqlite:///[\w./-]+", citus_url, block.code)
        assert citus_url in code, f"{block.where} has no SQLite URL to replace"
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            exec(compile(code, block.where, "exec"), {"__name__": "readme"})
        finally:
            os.chdir(cwd)
