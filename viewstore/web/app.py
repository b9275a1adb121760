"""The ASGI app: routes, templates, static files, middleware and error handlers (``errors``).

Every handler is a plain function (Starlette runs it in its thread pool): the store is
synchronous, and a slow read must not hold up the event loop.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from viewstore.domain.errors import ConversationNotFoundError, InvalidArgumentError, ViewstoreError
from viewstore.store import EventStore
from viewstore.web import api, details, errors, feed_stream, pages
from viewstore.web.feed_stream import FeedStreams
from viewstore.web.model import NotFound
from viewstore.web.params import BadRequest
from viewstore.web.readonly import read_only_store
from viewstore.web.security import SecurityMiddleware
from viewstore.web.urlcheck import URLCheck

HERE = Path(__file__).parent

#: ``viewstore serve --workers N`` hands each worker process the settings it checked through
#: this variable (JSON: url, schema, token); uvicorn starts workers from an import string.
WORKER_SETTINGS = "VIEWSTORE_SERVE_WORKER_SETTINGS"


def templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # event text is untrusted
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = details.when
    return Jinja2Templates(env=env)


def create_app(
    store: EventStore | str,
    *,
    schema: str | None = None,
    token: str | None = None,
    max_streams: int | None = None,
) -> Starlette:
    """The viewer over ``store`` (a URL: opened read-only, in PostgreSQL schema ``schema``
    if given, and closed with the app). Every answer carries security headers; with
    ``token`` every request needs it (``viewstore.web.security``). ``max_streams``: open
    feed streams at most (``viewstore.web.feed_stream``; default
    ``$VIEWSTORE_SERVE_MAX_STREAMS``, else 100)."""
    streams = FeedStreams(feed_stream.max_streams(max_streams))  # checked before opening
    owned = isinstance(store, str)
    reader = read_only_store(store, schema) if isinstance(store, str) else store
    app = Starlette(
        routes=[
            Mount("/api", routes=api.routes()),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
            *pages.routes(),
        ],
        exception_handlers={
            HTTPException: errors.http_error,
            BadRequest: errors.handler(400),
            InvalidArgumentError: errors.handler(400),
            ConversationNotFoundError: errors.handler(404),
            NotFound: errors.handler(404),
            ViewstoreError: errors.handler(503),
            Exception: errors.handler(500),
        },
        lifespan=_closing(streams, reader if owned else None),
        middleware=[
            Middleware(SecurityMiddleware, token=token, browser=True),  # the token first
            Middleware(URLCheck),
        ],
    )
    app.state.store = reader
    app.state.templates = templates()
    app.state.feed_streams = streams
    return app


def _closing(streams: FeedStreams, owned: EventStore | None) -> Any:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await streams.aclose()
            if owned is not None:
                owned.engine.dispose()

    return lifespan


def worker_app() -> Starlette:
    """The app of one ``viewstore serve --workers N`` process (uvicorn's factory)."""
    settings = json.loads(os.environ[WORKER_SETTINGS])
    return create_app(settings["url"], schema=settings["schema"], token=settings["token"])
