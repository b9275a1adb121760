"""The module of a connection's backend (``postgresql.py`` or ``sqlite.py``): the one place
the store asks which database it talks to before building a statement that differs."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import ColumnElement, Connection, FromClause, Select

from viewstore.store.database import postgresql, sqlite


class Backend(Protocol):
    """What each backend's module offers (modules satisfy it, PEP 544)."""

    NAME: str

    def insert(self, table: Any) -> Any: ...

    def locked(self, query: Select[Any], *, skip_locked: bool = False) -> Select[Any]: ...

    def json_text(self, column: str, key: str) -> str: ...

    def now(self, conn: Connection) -> datetime: ...

    def log_join(self, on: str) -> str: ...

    def log_rows(self, on: ColumnElement[bool]) -> tuple[FromClause, ColumnElement[bool]]: ...

    def keyed(
        self, columns: str, source: str, where: str, column: str, keys: Iterable[str]
    ) -> str: ...


_BY_NAME: dict[str, Backend] = {postgresql.NAME: postgresql, sqlite.NAME: sqlite}


def of(conn: Connection) -> Backend:
    return _BY_NAME[conn.dialect.name]


def spelled(template: str, on: str) -> dict[str, str]:
    """``template`` with ``{log}`` as each backend writes the join to the log (``on``: its
    condition), by backend name."""
    return {name: template.format(log=backend.log_join(on)) for name, backend in _BY_NAME.items()}
