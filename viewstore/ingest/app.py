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

Every post needs ``Authorization: Bearer <VIEWSTORE_INGEST_TOKEN>`` and must come from a
configured source (``viewstore.ingest.sources``). Refusals are JSON ``{"error": <one line>,
"status": N}`` and store nothing: 401 (token), 400 (conversation id, malformed JSON, a batch
too long or not a list of events, no known source), 413 (body too large), 409 (the stored log
is not a prefix of the server's, or the conversation was erased), 502 (the agent server
could not be read: the webhook retries), 503 (the database failed).

The app keeps no state between requests: any number of ingest processes may serve one store.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from viewstore.errors import (
    AgentServerError,
    ConversationErasedError,
    DuplicateEventError,
    InvalidArgumentError,
    SourceMismatchError,
    ViewstoreError,
)
from viewstore.ingest import info
from viewstore.ingest.agent_server import AgentServerClient
from viewstore.ingest.pull import changes_state, pull, wanted_ids
from viewstore.ingest.sources import Source, Sources
from viewstore.store import EventStore
from viewstore.web.security import SecurityMiddleware

log = logging.getLogger("viewstore.ingest")

TOKEN_ENV = "VIEWSTORE_INGEST_TOKEN"
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_BATCH = 1000
_HEX = re.compile(r"[0-9a-f]{32}")


class Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class Limits:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_batch: int = DEFAULT_MAX_BATCH


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
        ],
        exception_handlers={Refused: _refused, ViewstoreError: _failed, Exception: _failed},
        middleware=[Middleware(_Guard, token=token)],
        lifespan=_closing(writer) if owned else None,
    )
    app.state.store = writer
    app.state.sources = sources
    app.state.limits = limits or Limits()
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


async def _events(request: Request) -> Response:
    key = request.path_params["conversation"]
    if not _HEX.fullmatch(key):
        raise Refused(400, "the conversation id must be a UUID as 32 lowercase hex digits")
    body = await _json_body(request)
    limits: Limits = request.app.state.limits
    if not isinstance(body, list):
        raise Refused(400, "the body must be a JSON list of events")
    if len(body) > limits.max_batch:
        raise Refused(400, f"a batch holds at most {limits.max_batch} events, got {len(body)}")
    for index, event in enumerate(body):
        if not (
            isinstance(event, dict)
            and isinstance(event.get("id"), str)
            and event["id"]
            and isinstance(event.get("kind"), str)
        ):
            raise Refused(400, f"event #{index} is not an object with a string id and kind")
    source = _source(request)
    client = AgentServerClient(source)
    store: EventStore = request.app.state.store
    result = await run_in_threadpool(pull, store, client, key, wanted_ids(body))
    if changes_state(body):  # the status changed: the catalogue's copy follows
        await run_in_threadpool(_refresh_info, store, client, key)
    return JSONResponse({**result.as_json(), "source": source.name})


def _refresh_info(store: EventStore, client: AgentServerClient, key: str) -> None:
    """The conversation's info as its agent server has it now (the server posts its info
    when a conversation starts, pauses or is updated, not when a run ends)."""
    info.save(store, info.from_webhook(client.conversation(key)), client.source.name)


async def _conversations(request: Request) -> Response:
    body = await _json_body(request)
    try:
        record = info.from_webhook(body)
    except InvalidArgumentError as error:
        raise Refused(400, str(error)) from error
    source = _source(request)
    store: EventStore = request.app.state.store
    await run_in_threadpool(info.save, store, record, source.name)
    client = AgentServerClient(source)
    result = await run_in_threadpool(pull, store, client, record.conversation_id, None)
    return JSONResponse({**result.as_json(), "source": source.name})


def _source(request: Request) -> Source:
    sources: Sources = request.app.state.sources
    source = sources.for_request(request.headers)
    if source is None:
        raise Refused(
            400,
            "no configured agent server for this post: name it with an X-Viewstore-Source "
            "header in the webhook's headers (sources file: VIEWSTORE_INGEST_SOURCES)",
        )
    return source


async def _json_body(request: Request) -> Any:
    limit: int = request.app.state.limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refused(413, f"the body is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"the body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as error:
        raise Refused(400, f"the body is not valid JSON: {_one_line(str(error))}") from error


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return _answer(exc.status, exc.reason)


def _failed(request: Request, exc: Exception) -> Response:
    if isinstance(exc, AgentServerError):
        status = 502
    elif isinstance(exc, SourceMismatchError | DuplicateEventError | ConversationErasedError):
        status = 409
    elif isinstance(exc, InvalidArgumentError | ValueError) and isinstance(exc, ViewstoreError):
        status = 400
    elif isinstance(exc, ViewstoreError):
        status = 503
    else:
        log.exception("ingest error on %s", request.url.path, exc_info=exc)
        return _answer(500, "the ingest failed on this request; its log has the details")
    log.warning("%s: %s", request.url.path, exc)
    return _answer(status, _one_line(str(exc)))


def _answer(status: int, reason: str) -> Response:
    return JSONResponse({"error": reason, "status": status}, status_code=status)
