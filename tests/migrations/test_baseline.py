"""The baseline revision builds the store the folded revisions built.

``data/folded_0027.json`` was recorded (with ``_snapshot.snapshot``) from stores that revisions
0001 to 0027 built, one after the other, at commit f285989, the last before they were folded:
a SQLite file, a PostgreSQL database, one hash-partitioned into 4, and one in its own schema.
A store the baseline builds today must equal each: every table, column, constraint, index,
trigger, function, view, sequence, grant of viewstore's roles, partition, and row, but for
the changes made to the baseline since (no store outside the repository predates the
release), each applied to the recording by ``_since_the_fold`` and named there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from viewstore import EventStore

from ._snapshot import Snapshot, snapshot

_RECORDED = (Path(__file__).parent / "data" / "folded_0027.json").read_text()

# PostgreSQL's condensation_forgotten reads each condensation's log row through a lookup
# behind OFFSET 0, not a join (issue 41; the baseline says why): the view's text as the
# server prints it, before and after.
_FORGOTTEN_LOG_ROW = (
    "JOIN events e ON ((((e.conversation_id)::text = (c.conversation_id)::text) "
    "AND (e.seq = c.seq))))",
    "CROSS JOIN LATERAL ( SELECT l.payload FROM events l WHERE "
    "(((l.conversation_id)::text = (c.conversation_id)::text) AND (l.seq = c.seq)) OFFSET 0) e)",
)


# PostgreSQL's unique event ids per conversation are a partial unique index over every row, no
# longer a constraint (issue 41; viewstore/store/database/schema.py says why): the index gains
# its predicate and an index's name (a partition's copy the name PostgreSQL gives an index's),
# and the constraints go. SQLite keeps its constraint.
_LOG_IDS = (
    ("uq_events_conversation_id_event_id", "ix_events_conversation_id_event_id"),
    ("USING btree (conversation_id, event_id)", "USING btree (conversation_id, event_id) "
     "WHERE (event_id IS NOT NULL)"),
    ("conversation_id_event_id_key", "conversation_id_event_id_idx"),
)  # fmt: skip
_LOG_IDS_CONSTRAINT = "UNIQUE (conversation_id, event_id)"


# The orders by version and view length are catalogue_sizes' (issue 41,
# viewstore/store/read/sizes.py): the conversations' two order indexes go (a partition's
# copies named by PostgreSQL), and the new table is compared with the models, not with the
# recording (tests/migrations/test_migrations.py), so its parts are taken out of the store
# the baseline builds.
_SIZE_INDEXES = re.compile(r"(ix_)?conversations(_p\d+)?_(version|view_length)_id(_idx)?\b")
_SIZES = "catalogue_sizes"


def _dropped(part: Any, pattern: re.Pattern[str]) -> Any:
    """``part`` without the entries (list items, keys) whose text ``pattern`` finds."""
    if isinstance(part, list):
        return [x for x in part if not pattern.search(json.dumps(x))]
    if isinstance(part, dict):
        return {
            key: _dropped(value, pattern) for key, value in part.items() if not pattern.search(key)
        }
    return part


def _since_the_fold(recorded: str) -> Any:
    """The recording with the changes made to the baseline since it was taken."""
    for old, new in (_FORGOTTEN_LOG_ROW, *_LOG_IDS):
        assert old in recorded, old
        recorded = recorded.replace(old, new)
    assert _SIZE_INDEXES.search(recorded)
    layouts = _dropped(json.loads(recorded), _SIZE_INDEXES)
    for name, layout in layouts.items():
        if name != "sqlite":
            kept = [c for c in layout["constraints"] if c[-1] != _LOG_IDS_CONSTRAINT]
            assert len(kept) < len(layout["constraints"])
            layout["constraints"] = kept
    return layouts


# A redaction record names the retention policy of a compaction (issue 42, docs/retention.md):
# the column is compared with the models (tests/migrations/test_migrations.py), and taken out
# of the store the baseline builds. No other part of a snapshot says "policy".
_POLICY = re.compile(r"\bpolicy\b")
# The records of masking (issue 42, docs/masking.md): the table, its guard and its grant are
# compared with the models, and taken out. No other part of a snapshot says "masks".
_MASKS = re.compile(r"masks")
# Full-text search (issue 43, docs/search.md): PostgreSQL's expression index over the log,
# SQLite's FTS5 table (with the shadow tables FTS5 keeps) and its triggers; taken out.
_SEARCH = re.compile(r"events_search|events_p\d+_to_tsvector_idx")


def _without_sizes(found: Any) -> Any:
    """A snapshot without the parts of ``catalogue_sizes``, the redactions' ``policy``
    column and the ``masks`` table, which it must hold."""
    assert _SIZES in json.dumps(found)
    assert _POLICY.search(json.dumps(found))
    assert _MASKS.search(json.dumps(found))
    assert _SEARCH.search(json.dumps(found))
    dropped = _dropped(_dropped(found, re.compile(_SIZES)), _POLICY)
    return _dropped(_dropped(dropped, _MASKS), _SEARCH)


FOLDED = _since_the_fold(_RECORDED)

# (layout, partitions, schema): the stores recorded in FOLDED.
POSTGRES_LAYOUTS = {
    "postgresql": (None, None),
    "partitioned": (4, None),
    "schema": (None, "agents"),
}


def _differences(found: Snapshot, recorded: Snapshot) -> list[str]:
    """One line per part that differs, naming what only one side has."""
    lines = []
    for part in sorted(set(found) | set(recorded)):
        mine, theirs = found.get(part), recorded.get(part)
        if mine == theirs:
            continue
        if isinstance(mine, list) and isinstance(theirs, list):
            a = {json.dumps(x) for x in mine}
            b = {json.dumps(x) for x in theirs}
            if a == b and len(mine) == len(theirs):
                continue  # the same parts, in another order (a renamed one sorts elsewhere)
            lines.append(f"{part}: baseline only {sorted(a - b)}, folded only {sorted(b - a)}")
        else:
            lines.append(f"{part}: baseline {mine!r}\n  folded {theirs!r}")
    return lines


def _normal(shot: Snapshot) -> Any:
    return json.loads(json.dumps(shot))  # tuples to lists, as the recording holds them


@pytest.fixture
def built(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, EventStore]]:
    layout: str = request.param
    if layout == "sqlite":
        store = EventStore(f"sqlite:///{tmp_path / 'baseline.db'}")
        store.create_schema()
    else:
        url = request.getfixturevalue("fresh_pg_url")
        partitions, schema = POSTGRES_LAYOUTS[layout]
        store = EventStore(url, schema=schema)
        store.create_schema(partitions=partitions)
    try:
        yield layout, store
    finally:
        store.close()


LAYOUTS = [
    "sqlite",
    *(pytest.param(name, marks=pytest.mark.postgres) for name in POSTGRES_LAYOUTS),
]


@pytest.mark.parametrize("built", LAYOUTS, indirect=True)
def test_the_baseline_builds_what_the_folded_revisions_built(
    built: tuple[str, EventStore],
) -> None:
    layout, store = built
    with store.engine.connect() as conn:
        found = _without_sizes(_normal(snapshot(conn, store.schema)))
    assert _differences(found, FOLDED[layout]) == []


@pytest.mark.parametrize("built", ["sqlite", LAYOUTS[1]], indirect=True)
def test_the_comparison_sees_a_missing_guard(built: tuple[str, EventStore]) -> None:
    """The comparison can fail: without the set-once guard the store is not the baseline."""
    layout, store = built
    trigger = "conversations_set_once" + ("" if layout == "sqlite" else " ON conversations")
    with store.engine.begin() as conn:
        conn.execute(text(f"DROP TRIGGER {trigger}"))
    with store.engine.connect() as conn:
        found = _without_sizes(_normal(snapshot(conn, store.schema)))
    assert any(line.startswith("trigger") for line in _differences(found, FOLDED[layout]))
