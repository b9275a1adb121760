"""The core of ``EventStore``: its engine, its settings and its transactions.

Every public method of the store is one transaction, opened by ``_read`` or ``_write`` here;
the helpers in the sub-packages (``append.rows``, ``read.reads``, ``audit.audit`` and the
other row modules) take the connection and never commit. Driver errors are translated on the
way out by ``translated()``. The methods themselves live in a few small classes, one per
concern, that ``EventStore`` joins: ``event_store`` (appending, reading a view or log, the
feed), ``browsing_api`` (the catalogue, condensations, events by id), ``adapter_api`` (what
an adapter such as viewstore.openhands needs), ``audit_api`` (replay, verify, checkpoint,
rebuild) and ``lifecycle_api`` (erase).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from sqlalchemy import Connection, Engine

from viewstore.domain.chain import resolve_key
from viewstore.domain.errors import InvalidArgumentError, UnsupportedDatabaseError
from viewstore.store.append.tails import Tails
from viewstore.store.database import migrate, slow
from viewstore.store.database.engine import (
    ASYNC_SUPPORTED,
    SUPPORTED,
    WRITE,
    check_engine,
    check_schema,
    check_supported,
    configured_schema,
    create_engine_for,
    default_url,
)
from viewstore.store.database.translate import translated
from viewstore.store.distribution.seam import Distribution
from viewstore.store.inputs import DEFAULT_MAX_EVENT_BYTES, check_integer
from viewstore.store.read import reads

if TYPE_CHECKING:
    from viewstore.domain.masking import MaskingRules

ConversationId = str | uuid.UUID
#: = viewstore.domain.masking.MASKING_ENV, read here so a store without rules never imports it.
MASKING_ENV = "VIEWSTORE_MASKING_RULES"


def _masking(value: MaskingRules | str | Path | None) -> MaskingRules | None:
    if value is None and not os.environ.get(MASKING_ENV):
        return None
    from viewstore.domain.masking import resolve_masking  # noqa: PLC0415 - start-up time

    return resolve_masking(value)


class StoreCore:
    """Events, condensations, and each conversation's live view and indices, in SQL.

    ``url_or_engine``: a database URL (default: ``VIEWSTORE_URL``, else
    ``sqlite:///viewstore.db``), or an engine made by ``viewstore.create_engine`` (which
    applies the settings the store relies on; see ``check_engine``). ``schema``: on
    PostgreSQL, the schema the store's tables live in (created by ``create_schema``), so an
    application's own tables of the same names in ``public`` are never touched.
    """

    def __init__(
        self,
        url_or_engine: str | Engine | None = None,
        *,
        schema: str | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        chain_key: str | bytes | None = None,
        fast_path: bool = True,
        server_append: bool | None = None,
        masking: MaskingRules | str | Path | None = None,
    ) -> None:
        """``chain_key``: a secret that makes each event's hash an HMAC only its holders can
        compute (default: ``VIEWSTORE_CHAIN_KEY``; neither: plain SHA-256). Every writer and
        every verifier of a keyed store needs the same key; it is never stored.

        ``fast_path=False`` sends every append down the ordinary path. On a server that shards
        the tables by conversation (Citus) each of that path's statements goes to one shard,
        while the PostgreSQL fast path's single statement does not (docs/distribution.md).

        ``server_append``: on PostgreSQL the fast path calls the server-side function
        ``viewstore_append_rows`` (docs/schema.md) where the database has it (None, the default,
        finds out); False sends the equivalent single statement instead.

        ``masking``: rules (``MaskingRules``, or the path of their TOML file; default: the file
        ``VIEWSTORE_MASKING_RULES`` names, if set) applied to every appended event before it
        is hashed and stored (docs/masking.md)."""
        self._chain_key = resolve_key(chain_key)
        self.masking = _masking(masking)
        check_schema(schema)
        if isinstance(url_or_engine, Engine):
            # An asyncio driver only in an engine viewstore.aio set up: the asyncio store's.
            made_here, _ = configured_schema(url_or_engine)
            check_supported(
                url_or_engine.url, SUPPORTED | (ASYNC_SUPPORTED if made_here else set())
            )
            check_engine(url_or_engine, schema)
            self.engine = url_or_engine
            self._owns_engine = False
        else:
            self.engine = create_engine_for(url_or_engine or default_url(), schema=schema)
            self._owns_engine = True
        self.schema = schema
        self.max_event_bytes = check_integer("max_event_bytes", max_event_bytes, minimum=1)
        self._tails = Tails()
        self._fast = bool(fast_path)
        self._slow = slow.threshold()
        self._layout = Distribution(
            self.engine, server_function=None if server_append is None else bool(server_append)
        )

    # -- lifecycle ----------------------------------------------------------------------

    def create_schema(self, *, partitions: int | None = None) -> None:
        """Migrate the database to the newest schema (``alembic upgrade head``), in its own
        version table (``viewstore_alembic_version``; see ``viewstore.store.database.migrate``).

        A revision this code does not know (a newer viewstore's, another application's) raises
        ``SchemaMismatchError`` and nothing is migrated.

        Processes that run it at once on one database take turns: the migration, and the
        check of the revision it starts from, run under a lock (see ``revisions.migration_lock``),
        so one migrates and the others then find the schema at head.

        ``partitions`` (PostgreSQL, a new store): every table hash-partitioned by its
        conversation column into that many partitions (``viewstore.store.distribution.partitions``).
        """
        if partitions is not None:
            Distribution.check_partitions(partitions)
            if self.engine.dialect.name != "postgresql":
                raise UnsupportedDatabaseError(
                    "partitioned tables need PostgreSQL; an SQLite store is one file"
                )
        with translated():
            migrate.upgrade(self.engine, self.schema, partitions=partitions)

    def citus_distribute(self, *, dry_run: bool = False) -> list[str]:
        """Distribute the store over a Citus cluster (run on the coordinator, after
        ``create_schema``), in one transaction; returns the statements (``viewstore.store.
        citus``, docs/distribution.md). ``dry_run``: only return them. A database without
        the ``citus`` extension raises ``UnsupportedDatabaseError``."""
        if self.engine.dialect.name != "postgresql":
            raise UnsupportedDatabaseError("Citus distributes PostgreSQL databases only")
        if dry_run:
            return self._layout.distribute(None, dry_run=True)
        with self._write() as conn:
            return self._layout.distribute(conn, dry_run=False)

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at (``None``: no viewstore schema yet)."""
        with translated():
            return migrate.current_revision(self.engine, self.schema)

    def close(self) -> None:
        self._layout.close()
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with translated(), self.engine.execution_options(**WRITE).begin() as conn:
            yield conn

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A write transaction on the store's engine, committed at the end of the block (rolled
        back on an exception), for an application that writes its own rows and appends events
        together: ``store.append(..., connection=conn)`` inside it.

        Any transaction of the store's engine serves as well; this one is begun as a writer,
        which matters on SQLite: a transaction begun as a reader that later writes fails at
        once, instead of waiting, when another writer committed since it began.
        """
        with self._write() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        # One snapshot for the several statements of a read (SQLite: BEGIN; PostgreSQL:
        # REPEATABLE READ), so a read never mixes two versions of a conversation.
        options: dict[str, Any] = {}
        if self.engine.dialect.name == "postgresql":
            options["isolation_level"] = "REPEATABLE READ"
        with translated(), self.engine.execution_options(**options).begin() as conn:
            yield conn

    def _check_seq(self, conn: Connection, key: str, seq: int) -> int:
        version: int = reads.conversation_row(conn, key).version
        if not 0 <= seq <= version:
            raise InvalidArgumentError(
                f"as_of must be an integer between 0 and {version} for {key!r}, got {seq!r}"
            )
        return version
