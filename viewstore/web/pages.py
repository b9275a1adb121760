"""The HTML pages: each reads its data from ``model``/``details`` and renders a template."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from viewstore.domain import search as rules
from viewstore.domain.errors import ConversationNotFoundError, InvalidArgumentError
from viewstore.store import EventStore
from viewstore.web import details, model, params, search


def _store(request: Request) -> EventStore:
    store: EventStore = request.app.state.store
    return store


def _render(request: Request, name: str, context: dict[str, Any]) -> Response:
    page: Response = request.app.state.templates.TemplateResponse(request, name, context)
    return page


def conversations(request: Request) -> Response:
    data = details.list_data(
        _store(request),
        search=params.text(request, "q"),
        sort=params.choice(request, "sort", tuple(details.SORTS), "updated"),
        descending=params.choice(request, "order", ("asc", "desc"), "desc") == "desc",
        offset=params.integer(request, "offset", 0) or 0,
        after=params.cursor(request, "after"),
        before=params.cursor(request, "before"),
    )
    return _render(request, "list.html", {"data": data, "sorts": list(details.SORTS)})


def conversation(request: Request) -> Response:
    store, key = _store(request), params.conversation(request)
    seq = params.integer(request, "seq")
    view = model.view_data(store, key, seq, params.integer(request, "first"))
    log = model.log_data(store, key, view["seq"], params.integer(request, "log"))
    context = {
        "view": view,
        "log": log,
        "cuts": set(view["manipulation_indices"]),
        "windowed": view["length"] > model.VIEW_PAGE,
        "page": model.VIEW_PAGE,
        "origin": store.fork_origin(key),
        "agent": store.conversation_info(key),
    }
    records = store.redactions(key)
    context["redactions"] = [record for record in records if not record.compacted]
    # Compaction's records are many and alike: counted, with the policies that wrote them.
    context["compacted"] = [record for record in records if record.compacted]
    context["policies"] = sorted({record.policy for record in context["compacted"]})
    context["masked"] = store.masks(key)
    context["mask_rules"] = sorted({m.rule for r in context["masked"] for m in r.masked})
    return _render(request, "conversation.html", context)


def log_fragment(request: Request) -> Response:
    """Just the log panel, for the step control's script."""
    store, key = _store(request), params.conversation(request)
    log = model.log_data(store, key, params.integer(request, "seq"), params.integer(request, "log"))
    return _render(request, "_log.html", {"log": log})


def condensation(request: Request) -> Response:
    store, key = _store(request), params.conversation(request)
    data = details.condensation_data(store, key, params.path_int(request, "seq"))
    return _render(request, "condensation.html", {"c": data})


def audit(request: Request) -> Response:
    store, key = _store(request), params.conversation(request)
    return _render(request, "audit.html", {"a": details.audit_data(store, key)})


def event(request: Request) -> Response:
    store, key = _store(request), params.conversation(request)
    event_id = params.event_id(request)
    return _render(request, "event.html", {"e": details.event_data(store, key, event_id)})


def search_page(request: Request) -> Response:
    """The form, and the hits of the search it holds; a search the store refuses shows its
    reason above the form kept as typed."""
    asked = search.read(request, split=True)
    context: dict[str, Any] = {"s": asked, "kinds": search.KINDS, "windows": rules.WINDOWS}
    context.update(found=None, hits=[], error=None, next_link=None)
    status = 200
    if asked.query is not None:
        try:
            found = asked.run(_store(request))
        except (InvalidArgumentError, ConversationNotFoundError) as error:
            status = 404 if isinstance(error, ConversationNotFoundError) else 400
            context["error"] = " ".join(str(error).split())
        else:
            words = rules.words(asked.query)
            context["found"] = found
            context["hits"] = [(hit, search.marked(hit.snippet, words)) for hit in found.hits]
            if found.next_cursor is not None:
                context["next_link"] = asked.link(after=found.next_cursor)
    page: Response = request.app.state.templates.TemplateResponse(
        request, "search.html", context, status_code=status
    )
    return page


def routes() -> list[Route]:
    return [
        Route("/", conversations, name="conversations"),
        Route("/search", search_page, name="search"),
        Route("/c/{conversation_id}", conversation, name="conversation"),
        Route("/c/{conversation_id}/log", log_fragment, name="log"),
        Route("/c/{conversation_id}/audit", audit, name="audit"),
        Route("/c/{conversation_id}/condensation/{seq}", condensation, name="condensation"),
        Route("/c/{conversation_id}/e/{event_id:path}", event, name="event"),
    ]
