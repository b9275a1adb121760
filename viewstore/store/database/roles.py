"""The names of a PostgreSQL database's viewstore roles (created by the baseline migration).

Roles belong to the whole server, so a role shared by every viewstore database (as
``viewstore_reader`` was) lets a login granted it for one database read them all. Each database
therefore has its own pair, named after it:

- ``viewstore_reader_<database>`` may select the analyst views and (docs/schema.md) the tables
  the web viewer reads, and write nothing;
- ``viewstore_writer_<database>`` may append, read, rebuild and follow the feed, but owns
  nothing: it cannot alter a table, switch the append-only trigger off or replace its function.

A name longer than PostgreSQL's 63 bytes uses the MD5 of the database name instead. The
migration computes the same names in SQL; a renamed database keeps the roles it had.
"""

from __future__ import annotations

import hashlib

MAX_NAME_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1


def role_name(kind: str, database: str) -> str:
    """``kind`` is ``"reader"`` or ``"writer"``."""
    name = f"viewstore_{kind}_{database}"
    if len(name.encode("utf-8")) <= MAX_NAME_BYTES:
        return name
    return f"viewstore_{kind}_{hashlib.md5(database.encode('utf-8')).hexdigest()}"


def role_names(database: str) -> dict[str, str]:
    return {kind: role_name(kind, database) for kind in ("reader", "writer")}
