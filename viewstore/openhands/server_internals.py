"""Every reach into ``openhands-agent-server``'s internals, in one place (checked per release
by tests/agent_servers/test_server_internals.py, as ``sdk_internals`` is for the SDK).

``install`` makes an unmodified server keep its conversations in a viewstore instead of its
``conversations_path`` (docs/agent-servers.md). What it replaces, and why each:

- ``event_service.ConversationLease``: the server's lease is a file, which only servers
  sharing a file system see; ``StoreLease`` keeps it in the store's ``server_conversations``
  row (viewstore.store.adapters.runners). A refused claim answers HTTP 409, naming the holder.
- ``event_service.LocalConversation``: the server passes ``persistence_dir``; the factory passes
  ``file_store=ViewstoreFileStore`` instead (events and base state in the store).
- ``EventService.load_meta`` / ``save_meta``: ``meta.json`` becomes the row's ``meta``, written
  only by the lease's holder. ``EventService.start`` checks ``base_state.json`` on disk to tell
  a resume from a new conversation: a marker in the server's scratch folder answers it.
  ``EventService.for_persisted_events``: reads without a runtime read the store's log.
- ``ConversationService``: its catalog is loaded lazily, one conversation when asked for
  (start-up reads no conversation); its listing and count are keyset pages of the store; its
  base-state reads (status, info) read the store; ``delete_conversation`` also forgets the
  row (never the events). Idle conversations are let go after ``idle_seconds`` so another
  server may run them.
- ``dependencies.get_event_service``: a GET of a conversation's events is served from the
  store, without claiming the lease, unless this server runs the conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from importlib import metadata
from pathlib import Path
from typing import Any

from viewstore.domain.errors import RunnerHeldError, RunnerLostError, ViewstoreError
from viewstore.openhands.file_store import ViewstoreFileStore
from viewstore.store import EventStore
from viewstore.store import ServerOrder as Order

logger = logging.getLogger("viewstore.agent_server")

#: The releases whose internals this module was read against (x.y).
SUPPORTED = ("1.58",)
_MARKER_TEXT = "{}"  # the scratch base_state.json: read by nothing, its existence is the answer
_PREFIX = "viewstore:"  # the base-state "paths" of the catalog: not files
#: The base states of the listing page being composed, read in one statement before it: the
#: server asks for each row's signature and state one by one (a transaction each, and the
#: signature on its event loop). Set in the listing's task only, so nothing else reads them.
_page_states: ContextVar[dict[str, Any] | None] = ContextVar("_page_states", default=None)


class UnsupportedServerError(ViewstoreError):
    """The installed ``openhands-agent-server`` is not a release this module was read against."""


#: Every name this module reaches for, by module: ``missing()`` checks a release has each.
REACHED = {
    "openhands.agent_server.event_service": (
        "ConversationLease",
        "LocalConversation",
        "EventService.start",
        "EventService.load_meta",
        "EventService.save_meta",
        "EventService.for_persisted_events",
        "EventService.conversation_dir",
        "EventService._last_goal_loop_status",
    ),
    "openhands.agent_server.conversation_service": (
        "_state_signature",
        "_read_execution_status_sync",
        "_ConversationRecord",
        "ConversationService.get_instance",
        "ConversationService.__aenter__",
        "ConversationService.__aexit__",
        "ConversationService._load_catalog_sync",
        "ConversationService._base_state_path",
        "ConversationService._load_persisted_state_sync",
        "ConversationService._search_conversations",
        "ConversationService._count_conversations",
        "ConversationService._conversation_info",
        "ConversationService._cipher_for",
        "ConversationService._evict_idle_conversations",
        "ConversationService._get_or_load_event_service_locked",
        "ConversationService.get_persisted_event_service",
        "ConversationService.delete_conversation",
    ),
    "openhands.agent_server.conversation_lease": (
        "LeaseClaim",
        "ConversationOwnershipLostError",
    ),
    "openhands.agent_server.dependencies": ("get_event_service", "get_conversation_service"),
    "openhands.agent_server.models": ("StoredConversation", "ConversationSortOrder"),
}


def missing() -> list[str]:
    """The names of ``REACHED`` the installed server lacks (empty on a supported release)."""
    import importlib  # noqa: PLC0415

    absent = []
    for module_name, names in REACHED.items():
        module = importlib.import_module(module_name)
        for name in names:
            found: Any = module
            for part in name.split("."):
                found = getattr(found, part, None)
            if found is None:
                absent.append(f"{module_name}.{name}")
    return absent


def server_version() -> str:
    return metadata.version("openhands-agent-server")


def check_version() -> str:
    version = server_version()
    if ".".join(version.split(".")[:2]) not in SUPPORTED:
        raise UnsupportedServerError(
            f"openhands-agent-server {version} is not supported on the store "
            f"(supported: {', '.join(SUPPORTED)}.x)"
        )
    return version


class _Settings:
    store: EventStore
    name: str
    idle_seconds: float
    scratch: Path


_settings = _Settings()


# --------------------------------------------------------------------------- the lease


class StoreLease:
    """The server's ``ConversationLease``, kept in the store. Writes are fenced by the lease's
    remaining time as this process counts it, and by the store when that has run out: a server
    that stalled past its lease asks the store before writing again."""

    def __init__(
        self, *, conversation_dir: Path, owner_instance_id: str, ttl_seconds: float
    ) -> None:
        self._dir = conversation_dir
        self._conversation_id = conversation_dir.name
        self._owner = owner_instance_id
        self.runner = f"{_settings.name} ({owner_instance_id[:12]})"
        self._ttl = ttl_seconds
        self._valid_until = 0.0  # monotonic: writes need no store round trip before it

    def _counted(self, started: float) -> None:
        self._valid_until = started + 0.8 * self._ttl

    def claim(self) -> Any:
        from openhands.agent_server.conversation_lease import LeaseClaim  # noqa: PLC0415

        started = time.monotonic()
        try:
            claim = _settings.store.claim_runner(self._conversation_id, self.runner, ttl=self._ttl)
        except RunnerHeldError as error:
            raise _refused(error) from error
        self._counted(started)
        if claim.taken_from is not None:
            logger.warning(
                "took conversation %s over from %s (generation %d)",
                self._conversation_id,
                claim.taken_from,
                claim.generation,
            )
        return LeaseClaim(generation=claim.generation, takeover=claim.taken_from is not None)

    def renew(self, generation: int) -> None:
        started = time.monotonic()
        try:
            _settings.store.renew_runner(
                self._conversation_id, self.runner, generation, ttl=self._ttl
            )
        except RunnerLostError as error:
            raise self._lost(generation) from error
        self._counted(started)

    @contextlib.contextmanager
    def guarded_write(self, generation: int) -> Iterator[None]:
        if time.monotonic() >= self._valid_until:
            self.renew(generation)  # fenced by the store: refused if another server took over
        yield

    def release(self, generation: int) -> None:
        self._valid_until = 0.0
        _settings.store.release_runner(self._conversation_id, self.runner, generation)

    def _lost(self, generation: int) -> Exception:
        from openhands.agent_server.conversation_lease import (  # noqa: PLC0415
            ConversationOwnershipLostError,
        )

        lost: Exception = ConversationOwnershipLostError(
            conversation_dir=self._dir, owner_instance_id=self._owner, generation=generation
        )
        return lost


def _refused(error: RunnerHeldError) -> Exception:
    from fastapi import HTTPException  # noqa: PLC0415

    refusal: Exception = HTTPException(status_code=409, detail=str(error))
    return refusal


# --------------------------------------------------------------------------- event service


def _runner_of(service: Any) -> tuple[str, int]:
    lease = service._lease
    generation = service._lease_generation
    if not isinstance(lease, StoreLease) or generation is None:
        raise RunnerLostError(service.stored.id.hex, _settings.name, -1)
    return lease.runner, generation


def _meta_text(service: Any, stored: Any) -> str:
    text: str = stored.model_dump_json(context={"cipher": service.cipher})
    return text


def _install_event_service() -> None:
    from openhands.agent_server import event_service  # noqa: PLC0415
    from openhands.sdk.conversation.event_store import EventLog  # noqa: PLC0415
    from openhands.sdk.conversation.persistence_const import (  # noqa: PLC0415
        BASE_STATE,
        EVENTS_DIR,
    )

    service_class = event_service.EventService
    original_start = service_class.start
    original_conversation = event_service.LocalConversation

    def local_conversation(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("persistence_dir", None)
        cid = kwargs["conversation_id"]
        kwargs["file_store"] = ViewstoreFileStore(_settings.store, cid)
        return original_conversation(*args, **kwargs)

    async def start(self: Any) -> None:
        if self.lease_ttl_seconds <= 0:  # a lease is how servers share the store: never off
            self.lease_ttl_seconds = 45.0
        folder = self.conversation_dir
        folder.mkdir(parents=True, exist_ok=True)
        stored = await asyncio.to_thread(_settings.store.base_state, self.stored.id)
        marker = folder / BASE_STATE
        if stored is not None:
            marker.write_text(_MARKER_TEXT)
        else:
            marker.unlink(missing_ok=True)
        await original_start(self)

    async def load_meta(self: Any) -> None:
        from openhands.agent_server.models import StoredConversation  # noqa: PLC0415

        row = await asyncio.to_thread(_settings.store.server_conversation, self.stored.id)
        if row is None or row.meta is None:
            raise FileNotFoundError(f"{_PREFIX}{self.stored.id.hex}/meta.json")
        self.stored = StoredConversation.model_validate_json(
            row.meta, context={"cipher": self.cipher}
        )

    async def save_meta(self: Any, stored: Any = None) -> None:
        new_stored = self.stored if stored is None else stored
        runner, generation = _runner_of(self)
        try:
            await asyncio.to_thread(
                _settings.store.save_server_meta,
                new_stored.id,
                _meta_text(self, new_stored),
                runner=runner,
                generation=generation,
                created_at=new_stored.created_at,
                updated_at=new_stored.updated_at,
            )
        except RunnerLostError as error:
            raise self._lease._lost(generation) from error
        self.stored = new_stored

    def for_persisted_events(cls: Any, stored: Any, conversations_dir: Path) -> Any:
        service = cls(stored=stored, conversations_dir=conversations_dir)
        service._persisted_events = EventLog(
            ViewstoreFileStore(_settings.store, stored.id), dir_path=EVENTS_DIR
        )
        return service

    event_service.ConversationLease = StoreLease
    event_service.LocalConversation = local_conversation
    service_class.start = start
    service_class.load_meta = load_meta
    service_class.save_meta = save_meta
    service_class.for_persisted_events = classmethod(for_persisted_events)


def _install_goal_status() -> None:
    from openhands.agent_server.event_service import EventService  # noqa: PLC0415

    def last_goal_loop_status(self: Any) -> dict[str, Any] | None:
        # The server walks its log back for the last goal status at every load: through the
        # store that read every event of a log with none (most of a 20k-event takeover).
        # One query answers it, under the same state lock the walk held.
        conversation = self._conversation
        if conversation is None:
            return None
        with conversation._state:
            payload = _settings.store.last_state_update(conversation.id, "goal")
        value = None if payload is None else payload.get("value")
        return value if isinstance(value, dict) else None

    EventService._last_goal_loop_status = last_goal_loop_status


# --------------------------------------------------------------------------- the catalog


def _record(service: Any, row: Any) -> Any:
    from openhands.agent_server.conversation_service import _ConversationRecord  # noqa: PLC0415
    from openhands.agent_server.models import StoredConversation  # noqa: PLC0415
    from openhands.sdk.conversation.state import ConversationExecutionStatus  # noqa: PLC0415

    key = uuid.UUID(row.conversation_id)
    stored = StoredConversation.model_validate_json(
        row.meta, context={"cipher": service._cipher_for(key)}
    )
    try:
        status = ConversationExecutionStatus(row.execution_status or "idle")
    except ValueError:
        status = ConversationExecutionStatus.IDLE
    return _ConversationRecord(
        stored=stored, execution_status=status, base_state_path=f"{_PREFIX}{key.hex}"
    )


def _adopted(service: Any, key: uuid.UUID) -> Any:
    """The record of a conversation no store-backed server has run yet but the store holds
    (written by the SDK adapter, imported from a folder, mirrored by the ingest): its metadata
    made from its base state, as the server would have made it, written once a server runs it
    (``save_meta`` under the lease). None without a base state with a local workspace."""
    from openhands.agent_server.conversation_service import _ConversationRecord  # noqa: PLC0415
    from openhands.agent_server.models import StoredConversation  # noqa: PLC0415
    from openhands.sdk.conversation.state import ConversationExecutionStatus  # noqa: PLC0415

    base = _settings.store.base_state(key)
    if base is None:
        return None
    try:
        state = json.loads(base.payload)
        workspace = state["workspace"]
        stored = StoredConversation.model_validate(
            {"id": key, "workspace": {"working_dir": workspace["working_dir"]}},
            context={"cipher": service._cipher_for(key)},
        )
        status = ConversationExecutionStatus(state.get("execution_status") or "idle")
    except (ValueError, TypeError, KeyError) as error:
        logger.warning("conversation %s cannot be run here: its base state %s", key.hex, error)
        return None
    return _ConversationRecord(
        stored=stored, execution_status=status, base_state_path=f"{_PREFIX}{key.hex}"
    )


class _Catalog(dict[uuid.UUID, Any]):
    """The server's in-memory catalog, filled from the store one conversation at a time as the
    server asks for it: start-up reads none, and a conversation another server created is
    found the first time it is asked for."""

    def __init__(self, service: Any) -> None:
        super().__init__()
        self._service = service

    def _load(self, key: object) -> Any:
        if not isinstance(key, uuid.UUID):
            return None
        row = _settings.store.server_conversation(key)
        if row is None or row.meta is None:
            record = _adopted(self._service, key)
        else:
            record = _record(self._service, row)
        if record is not None:
            dict.__setitem__(self, key, record)
        return record

    def get(self, key: uuid.UUID, default: Any = None) -> Any:
        found = dict.get(self, key)
        if found is None:
            found = self._load(key)
        return default if found is None else found

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or self._load(key) is not None

    def __getitem__(self, key: uuid.UUID) -> Any:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def adopt(self, row: Any) -> Any:
        """The record of a listed row: the cached one, its metadata refreshed if the row's
        changed, else a new one."""
        key = uuid.UUID(row.conversation_id)
        fresh = _record(self._service, row)
        found = dict.get(self, key)
        if found is None:
            dict.__setitem__(self, key, fresh)
            return fresh
        if found.stored != fresh.stored:
            found.stored = fresh.stored
            found.cached_info = None
        found.execution_status = fresh.execution_status
        return found


def _conversation_key(path: str) -> str | None:
    return path[len(_PREFIX) :] if path.startswith(_PREFIX) else None


def _install_conversation_service() -> None:
    from openhands.agent_server import conversation_service as module  # noqa: PLC0415

    service_class = module.ConversationService
    original_get_instance = service_class.get_instance.__func__
    original_enter = service_class.__aenter__
    original_exit = service_class.__aexit__
    original_delete = service_class.delete_conversation
    original_load_service = service_class._get_or_load_event_service_locked

    def get_instance(cls: Any, config: Any) -> Any:
        service = original_get_instance(cls, config)
        service.conversations_dir = _settings.scratch
        return service

    def load_catalog(self: Any, conversation_id: uuid.UUID | None = None) -> dict[Any, Any]:
        catalog = _Catalog(self)
        if conversation_id is not None:
            catalog.get(conversation_id)
        return catalog

    async def delete(self: Any, conversation_id: uuid.UUID) -> bool:
        deleted: bool = await original_delete(self, conversation_id)
        if deleted:
            await asyncio.to_thread(_settings.store.forget_server_conversation, conversation_id)
        return deleted

    async def load_service(self: Any, conversation_id: uuid.UUID, **kwargs: Any) -> Any:
        services = self._event_services or {}
        live = services.get(conversation_id)
        if (live is None or not live.is_open()) and isinstance(
            self._conversation_records, _Catalog
        ):
            # Not run here now: another server may have run it since; read it again.
            dict.pop(self._conversation_records, conversation_id, None)
        return await original_load_service(self, conversation_id, **kwargs)

    async def enter(self: Any) -> Any:
        entered = await original_enter(self)
        self._viewstore_idle_task = asyncio.create_task(_let_idle_go(self))
        return entered

    async def exit_(self: Any, *exc: Any) -> Any:
        task = getattr(self, "_viewstore_idle_task", None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return await original_exit(self, *exc)

    service_class.get_instance = classmethod(get_instance)
    service_class._load_catalog_sync = load_catalog
    service_class.delete_conversation = delete
    service_class._get_or_load_event_service_locked = load_service
    service_class.__aenter__ = enter
    service_class.__aexit__ = exit_


def _install_base_state_reads() -> None:
    """The server reads a conversation's base state (status, info) by path: the catalog's
    paths name the store, and these read it there."""
    from openhands.agent_server import conversation_service as module  # noqa: PLC0415
    from openhands.sdk.conversation.persistence_const import BASE_STATE  # noqa: PLC0415
    from openhands.sdk.conversation.state import (  # noqa: PLC0415
        ConversationExecutionStatus,
        ConversationState,
    )

    original_signature = module._state_signature
    original_status = module._read_execution_status_sync

    def state_signature(path: str) -> tuple[int, int] | None:
        key = _conversation_key(path)
        if key is None:
            found: tuple[int, int] | None = original_signature(path)
            return found
        listed = (_page_states.get() or {}).get(key)
        if listed is not None:
            return (listed.revision, listed.version)
        return _settings.store.base_state_signature(key)

    def read_execution_status(path: str) -> Any:
        key = _conversation_key(path)
        if key is None:
            return original_status(path)
        state = _settings.store.base_state(key)
        if state is None:
            return None
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            return ConversationExecutionStatus(json.loads(state.payload)["execution_status"])
        return None

    def base_state_path(self: Any, conversation_id: uuid.UUID, record: Any) -> str:
        return f"{_PREFIX}{conversation_id.hex}"

    def load_persisted_state(self: Any, conversation_id: uuid.UUID) -> Any:
        listed = (_page_states.get() or {}).get(conversation_id.hex)
        if listed is not None and listed.behind <= 0:
            text = listed.payload
        else:  # not listed, or behind its log: the file store catches it up
            try:
                text = ViewstoreFileStore(_settings.store, conversation_id).read(BASE_STATE)
            except FileNotFoundError:
                return None
        cipher = self._cipher_for(conversation_id)
        return ConversationState.model_validate_json(
            text, context={"cipher": cipher} if cipher else None
        )

    module._state_signature = state_signature
    module._read_execution_status_sync = read_execution_status
    module.ConversationService._base_state_path = base_state_path
    module.ConversationService._load_persisted_state_sync = load_persisted_state


def _install_listing() -> None:
    """The server's conversation search and count: keyset pages and counts of the store."""
    from openhands.agent_server.conversation_service import ConversationService  # noqa: PLC0415
    from openhands.agent_server.models import ConversationSortOrder  # noqa: PLC0415

    orders: dict[Any, tuple[Order, bool]] = {
        ConversationSortOrder.CREATED_AT: ("created_at", False),
        ConversationSortOrder.CREATED_AT_DESC: ("created_at", True),
        ConversationSortOrder.UPDATED_AT: ("updated_at", False),
        ConversationSortOrder.UPDATED_AT_DESC: ("updated_at", True),
    }

    async def search(
        self: Any, page_id: str | None, limit: int, execution_status: Any, sort_order: Any
    ) -> tuple[list[Any], str | None]:
        if self._event_services is None:
            raise ValueError("inactive_service")
        order, descending = orders.get(sort_order, ("created_at", False))
        rows = await asyncio.to_thread(
            _settings.store.server_conversations,
            order=order,
            descending=descending,
            start=page_id or None,
            limit=limit + 1,
            status=None if execution_status is None else execution_status.value,
        )
        catalog = self._conversation_records
        states = await asyncio.to_thread(
            _settings.store.base_states, [row.conversation_id for row in rows[:limit]]
        )
        items = []
        token = _page_states.set(states)
        try:
            for row in rows[:limit]:
                record = catalog.adopt(row) if isinstance(catalog, _Catalog) else _record(self, row)
                key = uuid.UUID(row.conversation_id)
                info = await self._conversation_info(key, record, {})
                if info is not None:
                    items.append(info)
        finally:
            _page_states.reset(token)
        following = rows[limit].conversation_id if len(rows) > limit else None
        return items, following

    async def count(self: Any, execution_status: Any) -> int:
        if self._event_services is None:
            raise ValueError("inactive_service")
        status = None if execution_status is None else execution_status.value
        found: int = await asyncio.to_thread(
            _settings.store.count_server_conversations, status=status
        )
        return found

    ConversationService._search_conversations = search
    ConversationService._count_conversations = count


async def _let_idle_go(service: Any) -> None:
    """Close conversations idle for ``idle_seconds`` (the server's own eviction), which
    releases their leases: another server may then run them at once."""
    idle = _settings.idle_seconds
    while True:
        await asyncio.sleep(max(0.5, min(idle / 2, 10.0)))
        try:
            await service._evict_idle_conversations(idle)
        except Exception:
            logger.exception("letting idle conversations go failed")


# --------------------------------------------------------------------------- event reads


def _install_event_reads() -> None:
    from fastapi import Depends, HTTPException, Request  # noqa: PLC0415
    from openhands.agent_server import dependencies  # noqa: PLC0415

    original: Callable[..., Any] = dependencies.get_event_service

    async def get_event_service(
        conversation_id: uuid.UUID,
        request: Request,
        conversation_service: Any = Depends(dependencies.get_conversation_service),  # noqa: B008
    ) -> Any:
        services = conversation_service._event_services or {}
        live = services.get(conversation_id)
        if request.method == "GET" and (live is None or not live.is_open()):
            found = await conversation_service.get_persisted_event_service(conversation_id)
            if found is None:
                raise HTTPException(404, f"Conversation not found: {conversation_id}")
            return found
        return await original(conversation_id, request, conversation_service)

    # FastAPI reads the parameters' types; this module's annotations are strings it cannot
    # resolve (the names are imported here, not at module level).
    get_event_service.__annotations__ = {
        "conversation_id": uuid.UUID,
        "request": Request,
        "conversation_service": Any,
        "return": Any,
    }
    dependencies.get_event_service = get_event_service


# --------------------------------------------------------------------------- install


def install(store: EventStore, *, name: str, idle_seconds: float = 30.0) -> None:
    """Make this process's agent server keep its conversations in ``store``. Call before the
    server's routers are imported (its ``--import-modules`` hook runs before them)."""
    check_version()
    absent = missing()
    if absent:
        raise UnsupportedServerError(f"openhands-agent-server lacks {', '.join(absent)}")
    # The server's logging sets the root logger to INFO, at which SQLAlchemy logs every
    # statement: a line per query on the server's console and time on every step.
    logging.getLogger("sqlalchemy").setLevel(logging.WARNING)
    if not idle_seconds > 0:
        raise ValueError(f"idle_seconds must be positive, got {idle_seconds!r}")
    _settings.store = store
    _settings.name = name
    _settings.idle_seconds = idle_seconds
    # The server still makes a folder per conversation (bash events, the resume marker): a
    # private one, so the configured conversations_path may be read-only or shared.
    _settings.scratch = Path(tempfile.mkdtemp(prefix="viewstore-agent-server-"))
    _install_event_service()
    _install_goal_status()
    _install_conversation_service()
    _install_base_state_reads()
    _install_listing()
    _install_event_reads()
