"""Shared helpers for the store contract suite: OpenHands-shaped event dicts, digests, dumps.

Builders follow the notation of docs/semantics.md (``S`` system prompt, ``U`` user message,
``M`` agent message, ``A`` action, ``O`` observation, ``E`` agent error, ``C`` condensation,
``R`` request, ``X`` a non-LLM state update) and return plain dicts, the form agent workers
append.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, MetaData, create_engine, inspect, select, text

from viewstore import Event, EventStore, StoredView

from ..view import _helpers as built
from ..view._helpers import digest

Payload = dict[str, Any]


# The store suite appends dicts, as a client would; they are the view suite's events, as JSON.


def _dicts(event: Event) -> Payload:
    payload: Payload = json.loads(event.payload_json)
    return payload


def S(eid: str = "S") -> Payload:
    return _dicts(built.S(eid))


def U(eid: str, text: str = "please fix the bug") -> Payload:
    return _dicts(built.U(eid, text))


def M(eid: str, text: str = "done") -> Payload:
    return _dicts(built.M(eid, text))


def A(eid: str, tc: str, r: str, thinking: bool = False) -> Payload:
    return _dicts(built.A(eid, tc, r, thinking))


def O(eid: str, tc: str, content: str = "ok") -> Payload:  # noqa: E743 - the spec's name
    return _dicts(built.O(eid, tc, content))


def E(eid: str, tc: str) -> Payload:
    return _dicts(built.E(eid, tc))


def C(
    eid: str,
    forget: Iterable[str] = (),
    summary: str | None = None,
    offset: int | None = None,
) -> Payload:
    return _dicts(built.C(eid, forget, summary, offset))


def R(eid: str) -> Payload:
    return _dicts(built.R(eid))


def X(eid: str) -> Payload:
    return _dicts(built.X(eid))


def history(n_pairs: int) -> list[Payload]:
    """``S U (A O)*n M``: a conversation of ``2 * n_pairs + 3`` events."""
    events = [S("S"), U("U")]
    for i in range(n_pairs):
        events += [A(f"a{i}", f"tc{i}", f"r{i}"), O(f"o{i}", f"tc{i}")]
    events.append(M("M"))
    return events


# --------------------------------------------------------------------------- digests


def view_digest(view: StoredView) -> list[Any]:
    return digest(view.event_ids, view.manipulation_indices, view.unhandled_condensation_request)


def triple(view: StoredView) -> tuple[list[str], list[int], bool]:
    """What a view is, for equality: ids, sorted indices, request flag."""
    return view.event_ids, list(view.manipulation_indices), view.unhandled_condensation_request


EMPTY_DIGEST = digest([], [0], False)


# --------------------------------------------------------------------------- vectors


@dataclass(frozen=True)
class Vector:
    name: str
    lines: list[str]  # the exact JSON text of each event
    expected: dict[str, Any]


def load_vectors(vectors_dir: Path, sub: str) -> list[Vector]:
    found = []
    for path in sorted((vectors_dir / sub).glob("*.jsonl")):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        expected_path = path.with_name(path.name.removesuffix(".jsonl") + ".expected.json")
        expected = json.loads(expected_path.read_text(encoding="utf-8"))
        found.append(Vector(path.stem, lines, expected))
    return found


# --------------------------------------------------------------------------- dumps


def dump(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, ordered: equal dumps mean an unchanged database."""
    reflected = MetaData()
    reflected.reflect(engine)
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for name in sorted(reflected.tables):
            table = reflected.tables[name]
            rows = conn.execute(select(table).order_by(*table.columns)).all()
            out[name] = [tuple(row) for row in rows]
    return out


def view_row_of(event_id: str) -> str:
    """A SQL test for ``view_entries`` naming the row of ``event_id`` (a literal id): a
    summary's row by the id it holds, an event's by its seq in the log, since an event's row
    holds no id (revision 0026)."""
    return (
        f"(event_id = '{event_id}' OR (NOT is_summary AND seq = (SELECT e.seq FROM events e "
        f"WHERE e.event_id = '{event_id}' AND e.conversation_id = view_entries.conversation_id)))"
    )


def count_rows(engine: Engine, table: str, where: str = "1=1", **params: Any) -> int:
    with engine.connect() as conn:
        value = conn.execute(text(f"SELECT count(*) FROM {table} WHERE {where}"), params)
        return int(value.scalar_one())


def set_schema_revision(url: str, *revisions: str) -> None:
    """Write ``revisions`` into viewstore's Alembic version table, as another program might.

    The table is found by its shape (a ``version_num`` column), not by a name that may change.
    """
    engine = create_engine(url)
    try:
        inspector = inspect(engine)
        (table,) = [
            name
            for name in inspector.get_table_names()
            if "version" in name
            and [c["name"] for c in inspector.get_columns(name)] == ["version_num"]
        ]
        with engine.begin() as conn:
            conn.execute(text(f'DELETE FROM "{table}"'))
            for revision in revisions:
                conn.execute(text(f'INSERT INTO "{table}" VALUES (:r)'), {"r": revision})
    finally:
        engine.dispose()


@contextmanager
def appending_meanwhile(
    store: EventStore, append: Callable[[EventStore, int], None], steps: int
) -> Iterator[None]:
    """While the body runs, another ``EventStore`` on the same engine calls ``append(it, i)``
    for ``i`` in ``range(steps)`` in a thread, until the body ends; what it raised is raised."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        other = type(store)(store.engine)
        try:
            for i in range(steps):
                if stop.is_set():
                    return
                append(other, i)
        except BaseException as error:  # the test's thread raises it below
            errors.append(error)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    if errors:
        raise errors[0]


#: The layouts the migration tests take a store of each through.
LAYOUTS = ["sqlite", "postgres", "postgres_partitioned"]


def layout_url(request: pytest.FixtureRequest, layout: str) -> tuple[str, int | None]:
    """An empty database of ``layout`` (one of ``LAYOUTS``) and its partitions argument; the
    PostgreSQL ones mark the test ``postgres``."""
    if layout == "sqlite":
        return str(request.getfixturevalue("sqlite_url")), None
    request.applymarker(pytest.mark.postgres)
    url = str(request.getfixturevalue("fresh_pg_url"))
    return url, 4 if layout == "postgres_partitioned" else None
