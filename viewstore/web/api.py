"""The JSON API under /api/: the same data as the pages (described by ``openapi``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from viewstore.store import EventStore
from viewstore.web import details, feed_stream, model, params, search
from viewstore.web.openapi import schema


def _store(request: Request) -> EventStore:
    store: EventStore = request.app.state.store
    return store


def conversations(request: Request) -> JSONResponse:
    limit = params.integer(request, "limit", details.PAGE) or 0
    if not 1 <= limit <= 1000:
        raise params.BadRequest(f"limit must be from 1 to 1000, got {limit}")
    return JSONResponse(
        details.list_data(
            _store(request),
            search=params.text(request, "q"),
            sort=params.choice(request, "sort", tuple(details.SORTS), "updated"),
            descending=params.choice(request, "order", ("asc", "desc"), "desc") == "desc",
            offset=params.integer(request, "offset", 0) or 0,
            after=params.cursor(request, "after"),
            before=params.cursor(request, "before"),
            limit=limit,
        )
    )


def view(request: Request) -> JSONResponse:
    key = params.conversation(request)
    seq, first = params.integer(request, "seq"), params.integer(request, "first")
    return JSONResponse(model.view_data(_store(request), key, seq, first))


def log(request: Request) -> JSONResponse:
    key = params.conversation(request)
    limit = params.integer(request, "limit", model.LOG_PAGE) or 0
    if not 1 <= limit <= 1000:
        raise params.BadRequest(f"limit must be from 1 to 1000, got {limit}")
    return JSONResponse(
        model.log_data(
            _store(request),
            key,
            params.integer(request, "seq"),
            params.integer(request, "after"),
            limit=limit,
        )
    )


def diff(request: Request) -> JSONResponse:
    key = params.conversation(request)
    start, end = params.integer(request, "from"), params.integer(request, "to")
    if start is None or end is None:
        raise params.BadRequest("from and to are required (two seqs)")
    return JSONResponse(model.diff_data(_store(request), key, start, end))


def condensation(request: Request) -> JSONResponse:
    key = params.conversation(request)
    seq = params.path_int(request, "seq")
    return JSONResponse(details.condensation_data(_store(request), key, seq))


def audit(request: Request) -> JSONResponse:
    key = params.conversation(request)
    return JSONResponse(details.audit_data(_store(request), key))


def event(request: Request) -> JSONResponse:
    key = params.conversation(request)
    event_id = params.event_id(request)
    return JSONResponse(details.event_data(_store(request), key, event_id))


def search_events(request: Request) -> JSONResponse:
    found = search.read(request)
    if found.query is None:
        raise params.BadRequest("q is required: the words to search for")
    return JSONResponse(found.run(_store(request)).to_dict())


def openapi(request: Request) -> JSONResponse:
    return JSONResponse(schema())


def routes() -> list[Route]:
    return [
        Route("/openapi.json", openapi),
        Route("/conversations", conversations),
        Route("/search", search_events),
        Route("/feed/follow", feed_stream.follow),
        Route("/c/{conversation_id}/view", view),
        Route("/c/{conversation_id}/log", log),
        Route("/c/{conversation_id}/diff", diff),
        Route("/c/{conversation_id}/audit", audit),
        Route("/c/{conversation_id}/condensation/{seq}", condensation),
        Route("/c/{conversation_id}/e/{event_id:path}", event),
    ]
