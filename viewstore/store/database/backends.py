"""The module of a connection's backend (``postgresql.py`` or ``sqlite.py``): the one place
the store asks which database it talks to before building a statement that differs."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, Select

from viewstore.store.database import postgresql, sqlite


class Backend(Protocol):
    """What each backend's module offers (modules satisfy it, PEP 544)."""

    NAME: str

    def insert(self, table: Any) -> Any: ...

    def locked(self, query: Select[Any]) -> Select[Any]: ...

    def json_text(self, column: str, key: str) -> str: ...

    def now(self, conn: Connection) -> datetime: ...


_BY_NAME: dict[str, Backend] = {postgresql.NAME: postgresql, sqlite.NAME: sqlite}


def of(conn: Connection) -> Backend:
    return _BY_NAME[conn.dialect.name]
