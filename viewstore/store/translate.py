"""The one place where driver errors become viewstore errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from viewstore.errors import SchemaError, StorageError, ViewstoreError

_MISSING_TABLE_HINTS = ("no such table", "undefinedtable", "does not exist")


def translate(error: exc.SQLAlchemyError) -> ViewstoreError:
    text = str(error).lower()
    if isinstance(error, exc.OperationalError | exc.ProgrammingError) and any(
        hint in text for hint in _MISSING_TABLE_HINTS
    ):
        return SchemaError(
            "the viewstore schema is missing or outdated: run store.create_schema() "
            "or `viewstore init`"
        )
    detail = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
    return StorageError(f"database error ({type(error).__name__}): {detail}")


@contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except exc.SQLAlchemyError as error:
        raise translate(error) from error
