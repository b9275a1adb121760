"""The backend fixtures hand each test a fresh, empty, working database on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, Table, Text, create_engine, inspect, select

# JSON text as OpenHands writes it: a NUL escaped as \u0000 plus non-ASCII text (not escaped).
PAYLOAD = {"content": "before\x00after — ünïcödé 日本語 🚀", "kind": "MessageEvent"}
PAYLOAD_TEXT = json.dumps(PAYLOAD, ensure_ascii=False)


def _table(metadata: MetaData) -> Table:
    return Table(
        "events",
        metadata,
        Column("seq", Integer, primary_key=True),
        Column("payload", Text, nullable=False),
    )


def test_payload_round_trip(empty_db_url: str) -> None:
    assert "\\u0000" in PAYLOAD_TEXT  # escaped in the text, never a raw NUL byte
    assert "\x00" not in PAYLOAD_TEXT
    engine = create_engine(empty_db_url)
    try:
        metadata = MetaData()
        events = _table(metadata)
        metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(events.insert().values(seq=1, payload=PAYLOAD_TEXT))
        with engine.connect() as conn:
            stored = conn.execute(select(events.c.payload).where(events.c.seq == 1)).scalar_one()
        assert stored == PAYLOAD_TEXT
        assert json.loads(stored) == PAYLOAD
    finally:
        engine.dispose()


def test_database_starts_empty(empty_db_url: str) -> None:
    """Runs after test_payload_round_trip created a table: a fresh database has none."""
    engine = create_engine(empty_db_url)
    try:
        assert inspect(engine).get_table_names() == []
        metadata = MetaData()
        _table(metadata)
        metadata.create_all(engine)
        assert inspect(engine).get_table_names() == ["events"]
    finally:
        engine.dispose()


def test_vectors_present(vectors_dir: Path) -> None:
    for sub in ("cases", "micro", "openhands"):
        assert (vectors_dir / sub).is_dir()
    assert any((vectors_dir / "cases").glob("*.jsonl"))
