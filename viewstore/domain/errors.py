"""The one error tree of viewstore.

Every error the library raises on purpose derives from :class:`ViewstoreError`. Each precise
subclass also derives from the builtin a caller would naturally catch (``ValueError`` for bad
input, ``LookupError`` for a missing conversation), so code written against plain Python
exceptions keeps working. Driver errors never leave the store untranslated: they arrive here as
:class:`StorageError` (or a more precise subclass) with the driver error as ``__cause__``.
"""

from __future__ import annotations


class ViewstoreError(Exception):
    """Root of every error raised by viewstore."""


class InvalidEventError(ViewstoreError, ValueError):
    """An event (or a batch of events) cannot be accepted.

    ``kind`` and ``event_id`` identify the event where they are known, ``field`` names the
    offending top-level field (``None`` when the problem is the whole value), ``index`` is the
    event's position in the batch that was appended, when there was a batch.
    """

    def __init__(
        self,
        reason: str,
        *,
        kind: str | None = None,
        event_id: str | None = None,
        field: str | None = None,
        index: int | None = None,
    ) -> None:
        self.reason = reason
        self.kind = kind
        self.event_id = event_id
        self.field = field
        self.index = index
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.index is not None:
            where.append(f"event #{self.index}")
        if self.kind is not None:
            where.append(self.kind)
        if self.event_id is not None:
            where.append(f"id={self.event_id!r}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        prefix = ", ".join(where)
        text = f"{prefix}: {self.reason}" if prefix else self.reason
        # A kind may hold a lone surrogate (the very error reported): escape it, so that the
        # message itself can be printed and encoded.
        return text.encode("utf-8", "backslashreplace").decode("utf-8")

    def at_index(self, index: int) -> InvalidEventError:
        """The same error, placed at position ``index`` of a batch."""
        return type(self)(
            self.reason, kind=self.kind, event_id=self.event_id, field=self.field, index=index
        )


class PayloadTooLargeError(InvalidEventError):
    """An event's serialized payload exceeds the store's configured limit."""


class InvalidArgumentError(ViewstoreError, ValueError):
    """A call argument that is not an event is malformed (conversation id, seq, limit...)."""


class UnredactablePathError(InvalidArgumentError):
    """A redaction path points at, or into, a field the event's structure rests on: its
    envelope, or a name of a type, role or tool, an id or an enumerated state. The view and
    the OpenHands SDK's models read those fields; redacted, the event would no longer be the
    event it was (docs/lifecycle.md, Redaction). ``path`` is the JSON Pointer given,
    ``field`` the kept field it reaches."""

    def __init__(self, event_id: str, path: str, field: str, reason: str) -> None:
        self.event_id = event_id
        self.path = path
        self.field = field
        super().__init__(f"event {event_id!r}: {path} {reason} and cannot be redacted")


class CompactedHistoryError(InvalidArgumentError):
    """A fork would start from a view that holds an event whose content retention compacted
    (docs/retention.md): its LLM would be sent ``[compacted]`` where the content was. Fork at
    a later seq, where the condensation that forgot the event had run."""

    def __init__(self, conversation_id: str, at_seq: int, event_id: str, seq: int) -> None:
        self.conversation_id = conversation_id
        self.at_seq = at_seq
        self.event_id = event_id
        self.seq = seq
        super().__init__(
            f"conversation {conversation_id!r} cannot be forked at seq {at_seq}: its view there "
            f"holds event {event_id!r} (seq {seq}), whose content was compacted"
        )


class CheckpointError(InvalidArgumentError):
    """A checkpoint given to ``verify(against=...)`` is malformed, or its digest does not match
    what it holds (the checkpoint itself was altered)."""


class NoManipulationIndexError(ViewstoreError, ValueError):
    """``find_next`` found no manipulation index at or beyond the threshold."""


class ConversationNotFoundError(ViewstoreError, LookupError):
    """The conversation has no events in the store."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id!r} not found")


class ConversationErasedError(ViewstoreError):
    """The conversation was erased (``EventStore.erase``); its id is not used again."""

    def __init__(self, conversation_id: str, erased_at: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(
            f"conversation {conversation_id!r} was erased at {erased_at}: its id cannot be "
            "appended to again (see store.tombstone())"
        )


class ConversationExistsError(ViewstoreError, ValueError):
    """A new conversation was asked for under an id that is already taken."""

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        super().__init__(f"conversation {conversation_id!r} already exists")


class DamagedBaseStateError(ViewstoreError, ValueError):
    """A conversation's stored base state (the OpenHands SDK's ``base_state.json``) is not a
    JSON object, so nothing can resume from it. viewstore checks every base state it writes
    (viewstore/store/adapters/base_state.py): the row was changed by someone who can write the
    table. A ``ValueError``, as the ``json`` error it replaces was; ``verify`` reports it too."""

    def __init__(self, conversation_id: str, reason: str) -> None:
        self.conversation_id = conversation_id
        self.reason = reason
        super().__init__(
            f"the stored base state of conversation {conversation_id!r} is damaged: {reason} "
            "(run viewstore verify)"
        )


class ConversationHasForksError(ViewstoreError):
    """The conversation cannot be erased: forks still read their shared prefix from it."""

    def __init__(self, conversation_id: str, forks: list[str]) -> None:
        self.conversation_id = conversation_id
        self.forks = forks
        shown = ", ".join(repr(fork) for fork in forks[:5]) + (" ..." if len(forks) > 5 else "")
        super().__init__(
            f"conversation {conversation_id!r} has {len(forks)} fork(s) that share its events "
            f"({shown}): erase them first"
        )


class ChainMismatchError(ViewstoreError):
    """An operation that relies on the hash chain found it broken at the event it needed."""

    def __init__(self, conversation_id: str, seq: int, event_id: str, reason: str) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.event_id = event_id
        super().__init__(
            f"event {event_id!r} (seq {seq}) of conversation {conversation_id!r}: {reason}; "
            "nothing was changed (run viewstore verify)"
        )


class ConcurrencyError(ViewstoreError):
    """The conversation's version is not the one the caller expected.

    Raised before anything is written; the caller re-reads and decides again.
    """

    def __init__(self, conversation_id: str, expected: int, actual: int) -> None:
        self.conversation_id = conversation_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"conversation {conversation_id!r} is at version {actual}, expected {expected}"
        )


class DuplicateEventError(ViewstoreError, ValueError):
    """An event id is already taken by a different payload (or twice in one batch)."""

    def __init__(self, conversation_id: str, event_id: str, reason: str) -> None:
        self.conversation_id = conversation_id
        self.event_id = event_id
        self.reason = reason
        super().__init__(f"event {event_id!r} in conversation {conversation_id!r}: {reason}")


class ImportFileError(ViewstoreError, ValueError):
    """A file or folder of an OpenHands conversation folder cannot be read, or written by an
    export (a corrupt event file, a path that leads outside the folder named...); names it."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class StorageError(ViewstoreError):
    """The database failed in a way that is not the caller's fault (translated driver error)."""


class SchemaError(StorageError):
    """The database schema is missing or not at the revision this code expects."""


class SchemaMismatchError(SchemaError):
    """The database's schema revision is not one this code knows: a newer viewstore migrated
    it, or the version table holds another application's revision. Nothing was migrated."""


class TransientStorageError(StorageError):
    """A failure that says nothing about the request and may pass if it is simply run again:
    the connection was lost (a server restart), the server cannot take connections right now,
    a serialization failure, a deadlock, a lock wait that timed out, SQLite busy beyond its
    timeout.

    Retrying an append after it is safe, even when the failure hid whether the commit went
    through: a resent batch that is already stored is a no-op (appends are idempotent by event
    id). :func:`viewstore.append_with_retry` does exactly that.
    """


class ServerUnreachableError(TransientStorageError):
    """The database server could not be reached: connection refused, host name not found,
    connection timed out. Transient when the server is restarting; lasting when the URL
    names the wrong host or port."""


class DatabaseNotFoundError(StorageError):
    """The database named by the URL does not exist (or, for SQLite, its file cannot be
    opened). Creating the schema (``viewstore init``) needs the database to exist first."""


class AuthenticationError(StorageError):
    """The server refused the credentials: wrong password, unknown role, or no entry for this
    user, database and host in the server's access rules."""


class UnsupportedDatabaseError(ViewstoreError, ValueError):
    """The URL names a database or driver viewstore does not run on, or whose driver is not
    installed (viewstore runs on SQLite and on PostgreSQL through psycopg 3)."""


class MissingExtraError(ViewstoreError, ImportError):
    """A part of viewstore that needs an optional extra was imported without it (the asyncio
    store without greenlet); names the extra and the install that brings it."""

    def __init__(self, what: str, extra: str, error: ImportError) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs the {extra!r} extra: pip install -e '.[{extra}]' in a clone ({error})"
        )


class AgentServerError(ViewstoreError):
    """An OpenHands agent server the ingest or ``viewstore sync`` reads from could not answer
    (unreachable, an HTTP error, a body that is not what its REST API returns). Names the
    server and what was asked; the request may succeed later (``viewstore.ingest``).
    ``status`` is the HTTP status the server answered, when it answered one."""

    def __init__(self, source: str, reason: str, *, status: int | None = None) -> None:
        self.source = source
        self.reason = reason
        self.status = status
        super().__init__(f"agent server {source}: {reason}")


class ConversationOwnedError(ViewstoreError):
    """A conversation belongs to another source (the agent server it was ingested from), or to
    none while it holds events: only its owner may add to it or describe it, until an operator
    hands it over (``EventStore.hand_over``, ``viewstore hand-over``)."""

    def __init__(self, conversation_id: str, source: str, owner: str | None) -> None:
        self.conversation_id = conversation_id
        self.source = source
        self.owner = owner
        whose = (
            f"belongs to agent server {owner!r}"
            if owner is not None
            else "holds events that no agent server was the source of"
        )
        super().__init__(
            f"conversation {conversation_id!r} {whose}, not {source!r}: refused "
            "(an operator may move it with `viewstore hand-over`)"
        )


class SourceMismatchError(ViewstoreError):
    """A conversation's stored log is not a prefix of its agent server's log (its last stored
    event is not in the server's log, or the server's events before it differ): the ingest
    stores nothing rather than append after events the server does not have."""

    def __init__(self, conversation_id: str, source: str, reason: str) -> None:
        self.conversation_id = conversation_id
        self.source = source
        super().__init__(f"conversation {conversation_id!r} from {source}: {reason}")


class RunnerHeldError(ViewstoreError):
    """Another agent server holds the conversation's runner lease, which has not expired: only
    one server runs a conversation at a time (docs/agent-servers.md). Nothing was written; ask
    again after ``expires_at``, or the holder, which releases the lease when it lets the
    conversation go idle."""

    def __init__(self, conversation_id: str, runner: str, expires_at: str) -> None:
        self.conversation_id = conversation_id
        self.runner = runner
        self.expires_at = expires_at
        super().__init__(
            f"conversation {conversation_id!r} is being run by agent server {runner!r} "
            f"(its lease runs to {expires_at}): refused, nothing written"
        )


class RunnerLostError(ViewstoreError):
    """An agent server wrote for a conversation whose runner lease it no longer holds (it
    expired and another server took the conversation over): the write was refused, so a
    server that stalled past its lease cannot write beside its successor."""

    def __init__(self, conversation_id: str, runner: str, generation: int) -> None:
        self.conversation_id = conversation_id
        self.runner = runner
        self.generation = generation
        super().__init__(
            f"agent server {runner!r} lost the lease of conversation {conversation_id!r} "
            f"(generation {generation}): write refused"
        )
