"""The ingest's ASGI app: the agent server's webhook protocol, at its root.

- ``POST /events/{hex}``: a JSON list of events (``event.model_dump(mode="json")``) of the
  conversation whose UUID is ``hex`` (32 lowercase hex digits); answered once the store holds
  them, and every event before them (``viewstore.ingest.pull``), with what was done.
- ``POST /conversations``: a ``ConversationInfo``; kept in the catalogue
  (``store.conversation_info``; refreshed from the server's REST API after a batch that
  reports a state change), then the conversation's events are pulled to the end of the
  server's log (a run's last events, if the queue dropped them, have no later batch to reveal
  the gap).
- ``GET /health``: ``{"ok": true}``, no token needed.
- ``GET /metrics``: the process's counters of posts, refusals and stored events, in
  Prometheus' text format (``viewstore.ingest.metrics``).

A conversation belongs to the source whose log first filled it: another source's post, pull
or info about it is refused (403) and changes nothing (``store.claim_conversation``). Each
source's work runs in threads of its own, a few at a time, every REST call to it bounded by
its ``timeout``: a slow or hanging agent server delays its own posts only, and past
``Limits.source_queue`` waiting posts it gets 503 at once.

Every post needs ``Authorization: Bearer <VIEWSTORE_INGEST_TOKEN>`` and must come from a
configured source (``viewstore.ingest.sources``). Refusals are JSON ``{"error": <one line>,
"status": N}`` and store nothing: 401 (token), 400 (conversation id, malformed JSON, a batch
too long or not a list of events with valid ids, no known source), 403 (another source's
conversation), 413 (body too large), 409 (the server's log does not extend the stored one,
or the conversation was erased), 502 (the agent server could not be read: the webhook
retries), 503 (the source has too many posts waiting, or the database failed).

The app keeps no state between requests: any number of ingest processes may serve one store.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from viewstore.domain.errors import (
    AgentServerError,
    ConversationErasedError,
    ConversationOwnedError,
    DuplicateEventError,
    InvalidArgumentError,
    SourceMismatchError,
    ViewstoreError,
)
from viewstore.domain.events import id_problem
from viewstore.ingest import info
from viewstore.ingest.agent_server import AgentServerClient
from viewstore.ingest.metrics import Metrics
from viewstore.ingest.pull import PullResult, changes_state, optional_ids, pull, wanted_ids
from viewstore.ingest.sources import Source, Sources
from viewstore.store import EventStore, SourceInfo
from viewstore.web.security import SecurityMiddleware

log = logging.getLogger("viewstore.ingest")

TOKEN_ENV = "VIEWSTORE_INGEST_TOKEN"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_BATCH = 1000
_HEX = re.compile(r"[0-9a-f]{32}")
_MAX_KIND = 255
T = TypeVar("T")


class Refused(Exception):
    def __init__(self, status: int, reason: str, why: str) -> None:
        self.status = status
        self.reason = reason
        self.why = why  # the metrics' reason label
        super().__init__(reason)


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_batch: int = DEFAULT_MAX_BATCH
    #: Threads working for one source at once (REST reads and appends).
    source_threads: int = 4
    #: Posts of one source in the ingest at once, working or waiting; past it: 503.
    source_queue: int = 64


@dataclass
class _Gate:
    """One source's share of the ingest: its own threads, and a count of its posts inside."""

    limiter: anyio.CapacityLimiter
    inside: int = 0


@dataclass
class _Gates:
    limits: Limits
    by_source: dict[str, _Gate] = field(default_factory=dict)

    async def run(self, source: Source, work: Callable[[], T]) -> T:
        gate = self.by_source.get(source.name)
        if gate is None:
            gate = _Gate(anyio.CapacityLimiter(self.limits.source_threads))
            self.by_source[source.name] = gate
        if gate.inside >= self.limits.source_queue:
            raise Refused(
                503,
                f"agent server {source.name} has {gate.inside} posts in the ingest already "
                "(it answers slowly?); try again later",
                "busy",
            )
        gate.inside += 1
        try:
            return await anyio.to_thread.run_sync(work, limiter=gate.limiter)
        finally:
            gate.inside -= 1


def create_app(
    store: EventStore | str,
    *,
    token: str,
    sources: Sources,
    schema: str | None = None,
    limits: Limits | None = None,
) -> Starlette:
    """The ingest over ``store`` (a URL: opened, and closed with the app)."""
    if not token:
        raise InvalidArgumentError(f"the ingest needs a token: set {TOKEN_ENV}")
    owned = isinstance(store, str)
    writer = EventStore(store, schema=schema) if isinstance(store, str) else store
    app = Starlette(
        routes=[
            Route("/events/{conversation}", _events, methods=["POST"]),
            Route("/conversations", _conversations, methods=["POST"]),
            Route("/health", _health, methods=["GET"]),
            Route("/metrics", _metrics, methods=["GET"]),
        ],
        exception_handlers={Refused: _refused, ViewstoreError: _failed, Exception: _failed},
        middleware=[Middleware(_Guard, token=token)],
        lifespan=_closing(writer) if owned else None,
    )
    app.state.store = writer
    app.state.sources = sources
    app.state.limits = limits or Limits()
    app.state.gates = _Gates(app.state.limits)
    app.state.metrics = Metrics()
    return app


class _Guard(SecurityMiddleware):
    """Headers on every answer; the token on everything but ``/health``."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/health":
            await SecurityMiddleware(self.app)(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def _closing(store: EventStore) -> Any:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            store.close()

    return lifespan


async def _health(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def _metrics(request: Request) -> Response:
    metrics: Metrics = request.app.state.metrics
    return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")


async def _events(request: Request) -> Response:
    key = request.path_params["conversation"]
    if not _HEX.fullmatch(key):
        raise Refused(
            400, "the conversation id must be a UUID as 32 lowercase hex digits", "bad_request"
        )
    body = await _json_body(request)
    limits: Limits = request.app.state.limits
    if not isinstance(body, list):
        raise Refused(400, "the body must be a JSON list of events", "bad_request")
    if len(body) > limits.max_batch:
        raise Refused(
            400, f"a batch holds at most {limits.max_batch} events, got {len(body)}", "bad_request"
        )
    for index, event in enumerate(body):
        _check_posted(index, event)
    source = _source(request)
    client = AgentServerClient(source)
    store: EventStore = request.app.state.store

    def work() -> PullResult:
        result = pull(store, client, key, wanted_ids(body), optional=optional_ids(body))
        if changes_state(body):  # the status changed: the catalogue's copy follows
            _refresh_info(store, client, key)
        return result

    result = await request.app.state.gates.run(source, work)
    return _done(request, source, result)


def _check_posted(index: int, event: Any) -> None:
    if not (
        isinstance(event, dict)
        and isinstance(event.get("id"), str)
        and isinstance(event.get("kind"), str)
    ):
        raise Refused(
            400, f"event #{index} is not an object with a string id and kind", "bad_request"
        )
    problem = id_problem(event["id"])
    if problem is not None:
        raise Refused(400, f"event #{index}: its id {problem}", "bad_request")
    kind = event["kind"]
    if not 0 < len(kind) <= _MAX_KIND or id_problem(kind) is not None:
        raise Refused(
            400,
            f"event #{index}: its kind must be 1..{_MAX_KIND} printable characters",
            "bad_request",
        )


def _refresh_info(store: EventStore, client: AgentServerClient, key: str) -> None:
    """The conversation's info as its agent server has it now (the server posts its info
    when a conversation starts, pauses or is updated, not when a run ends)."""
    info.save(store, _server_info(client, key), client.source.name)


def _server_info(client: AgentServerClient, key: str) -> SourceInfo:
    """What the source's agent server itself says of conversation ``key``: a post's body is
    only a request, never what is stored (a server that has no such conversation: 409)."""
    try:
        body = client.conversation(key)
    except AgentServerError as error:
        if error.status == 404:
            raise SourceMismatchError(
                key, client.source.name, "the agent server has no such conversation"
            ) from error
        raise
    try:
        record = info.from_webhook(body)
    except InvalidArgumentError as error:
        raise AgentServerError(client.source.name, f"its conversation {key}: {error}") from error
    if record.conversation_id != key:
        raise SourceMismatchError(
            key, client.source.name, "the agent server answered with another conversation"
        )
    return record


async def _conversations(request: Request) -> Response:
    body = await _json_body(request)
    try:
        key = info.from_webhook(body).conversation_id
    except InvalidArgumentError as error:
        raise Refused(400, str(error), "bad_request") from error
    source = _source(request)
    client = AgentServerClient(source)
    store: EventStore = request.app.state.store

    def work() -> PullResult:
        owner = store.conversation_owner(key)
        if owner is not None and owner != source.name:  # before asking its server anything
            raise ConversationOwnedError(key, source.name, owner)
        info.save(store, _server_info(client, key), source.name)
        return pull(store, client, key, None)

    result = await request.app.state.gates.run(source, work)
    return _done(request, source, result)


def _done(request: Request, source: Source, result: PullResult) -> Response:
    metrics: Metrics = request.app.state.metrics
    metrics.appended(source.name, result.appended)
    metrics.answered(source.name, _route(request), 200, None)
    return JSONResponse({**result.as_json(), "source": source.name})


def _source(request: Request) -> Source:
    sources: Sources = request.app.state.sources
    try:
        source = sources.for_request(request.headers)
    except InvalidArgumentError as error:
        raise Refused(403, str(error), "not_owner") from error
    if source is None:
        raise Refused(
            400,
            "no configured agent server for this post: name it with an X-Viewstore-Source "
            "header in the webhook's headers (sources file: VIEWSTORE_INGEST_SOURCES)",
            "bad_request",
        )
    request.state.source = source.name
    return source


async def _json_body(request: Request) -> Any:
    limit: int = request.app.state.limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refused(413, f"the body is larger than the limit of {limit} bytes", "too_large")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(
                    413, f"the body is larger than the limit of {limit} bytes", "too_large"
                )
            chunks.append(chunk)
    except ClientDisconnect as error:
        raise Refused(
            400, "the client hung up before the body was complete", "disconnected"
        ) from error
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as error:
        raise Refused(
            400, f"the body is not valid JSON: {_one_line(str(error))}", "bad_request"
        ) from error


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _route(request: Request) -> str:
    return "events" if request.url.path.startswith("/events/") else request.url.path.strip("/")


def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    if exc.why == "disconnected":  # nobody reads the answer: one line in the log, no more
        log.info("%s: the client hung up mid-body", request.url.path)
    return _answer(request, exc.status, exc.reason, exc.why)


#: The store's and the agent server's refusals: (status, the metrics' reason).
_STATUS: tuple[tuple[type[Exception], int, str], ...] = (
    (AgentServerError, 502, "agent_server"),
    (ConversationOwnedError, 403, "not_owner"),
    (SourceMismatchError, 409, "not_prefix"),
    (DuplicateEventError, 409, "duplicate"),
    (ConversationErasedError, 409, "erased"),
    (InvalidArgumentError, 400, "bad_request"),
)


def _failed(request: Request, exc: Exception) -> Response:
    status, why = _classify(exc)
    if status == 500:
        log.exception("ingest error on %s", request.url.path, exc_info=exc)
        reason = "the ingest failed on this request; its log has the details"
        return _answer(request, status, reason, why)
    log.warning("%s: %s", request.url.path, _one_line(str(exc)))
    return _answer(request, status, _one_line(str(exc)), why)


def _classify(exc: Exception) -> tuple[int, str]:
    for kind, status, why in _STATUS:
        if isinstance(exc, kind):
            return status, why
    if isinstance(exc, ViewstoreError):
        return 503, "database"
    return 500, "bug"


def _answer(request: Request, status: int, reason: str, why: str) -> Response:
    metrics: Metrics = request.app.state.metrics
    metrics.answered(getattr(request.state, "source", None), _route(request), status, why)
    return JSONResponse({"error": reason, "status": status}, status_code=status)
