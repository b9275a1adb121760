"""``viewstore citus distribute``: the statements it would run, checked against the real
schema; refused where there is no Citus. (No Citus cluster runs here: see
docs/distribution.md.)"""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import text

from viewstore import EventStore
from viewstore.store.database.schema import metadata

from ._process import error_line, run


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_the_statements_cover_the_schema(db_url: str) -> None:
    with EventStore(db_url) as store:
        store.create_schema()
        done = run("citus", "distribute", "--print", "--json", url=db_url)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["ran"] is False
        statements = answer["statements"]
        distributed = {
            m.group(1): (m.group(2), m.group(3))
            for s in statements
            if (m := re.match(r"SELECT create_distributed_table\('(\w+)', '(\w+)', "
                              r"colocate_with => '(\w+)'\)", s))
        }  # fmt: skip
        tables = {t.name for t in metadata.sorted_tables}
        assert set(distributed) == tables  # every table, none forgotten
        assert distributed["conversations"] == ("id", "none")
        assert {c for t, (_, c) in distributed.items() if t != "conversations"} == {"conversations"}
        (function,) = [s for s in statements if "create_distributed_function" in s]
        signature = re.search(r"'(viewstore_append_rows\(.*\))'", function)
        assert signature is not None
        with store.engine.connect() as conn:  # the very function migration 0014 made
            conn.execute(text(f"SELECT '{signature.group(1)}'::regprocedure"))
        assert any(s.startswith("GRANT SELECT ON conversations, events") for s in statements)
        assert (
            statements[0].startswith('ALTER DATABASE "')
            and "enable_unsafe_triggers" in (statements[0])
        )
        line = error_line(run("citus", "distribute", url=db_url))
        assert "no citus extension" in line


def test_sqlite_cannot_be_distributed(sqlite_url: str) -> None:
    EventStore(sqlite_url).create_schema()
    assert "PostgreSQL" in error_line(run("citus", "distribute", "--print", url=sqlite_url))
