"""Which pages a SQLite commit writes: the WAL's frames, counted by the b-tree each page is in.

With ``journal_mode = WAL`` every commit appends one frame (a page image) per page it changed,
and the checkpoint later copies them back: an append's cost grows with the pages it touches,
not with its bytes. ``pages_per_call`` runs a write ``count`` times from an empty WAL and reads
the frames back, naming each page by ``dbstat`` (the table or index holding it; page 1, the
file header, counts as ``sqlite_schema``: it changes whenever the file grows).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

_HEADER = 32  # the WAL file's header
_FRAME_HEADER = 24  # before each page image
#: Well below the automatic checkpoint (1,000 frames), which would start the WAL over.
MAX_FRAMES = 900


def _wal_path(engine: Engine) -> Path:
    database = engine.url.database
    if not database:
        raise ValueError("pages_per_call needs a SQLite file")
    return Path(database + "-wal")


def _frames(wal: Path) -> list[int]:
    data = wal.read_bytes()
    if len(data) < _HEADER:
        return []
    (page_size,) = struct.unpack(">I", data[8:12])
    pages = []
    for offset in range(
        _HEADER, len(data) - _FRAME_HEADER - page_size + 1, _FRAME_HEADER + page_size
    ):
        (page,) = struct.unpack(">I", data[offset : offset + 4])
        pages.append(page)
    return pages


def pages_per_call(engine: Engine, write: Callable[[], object], count: int) -> dict[str, float]:
    """Frames per call of ``write``, by b-tree name, with their sum under ``"total"``."""
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    for _ in range(count):
        write()
    frames = _frames(_wal_path(engine))
    if len(frames) > MAX_FRAMES:
        raise ValueError(f"{len(frames)} frames: too many calls to count before a checkpoint")
    with engine.connect() as conn:
        names: dict[int, str] = {
            int(page): str(name)
            for page, name in conn.exec_driver_sql("SELECT pageno, name FROM dbstat").all()
        }
    by_name = Counter(names.get(page, "(free)") for page in frames)
    result = {name: n / count for name, n in by_name.most_common()}
    result["total"] = len(frames) / count
    return result
