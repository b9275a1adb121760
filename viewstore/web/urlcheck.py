"""Refusing, before any route reads it, a URL that no page of the viewer can be named by.

Servers decode a path's %-escapes leniently (uvicorn and Starlette put U+FFFD where the bytes
are not UTF-8, so ``/c/%FF`` would look up a conversation named "\\ufffd"), and a NUL reaches
code that cannot take it (file lookups under /static/, PostgreSQL's text). ``URLCheck``
answers 400 with one line instead: once decoded, the path must be UTF-8 without a control
character (no conversation or event id holds one), the query UTF-8 (a NUL in a parameter is
refused by the parameter's own check, which names it).
"""

from __future__ import annotations

from urllib.parse import quote, unquote_to_bytes

from starlette.requests import Request

from viewstore.web.errors import error_response
from viewstore.web.security import ASGIApp, Receive, Scope, Send


class URLCheck:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = url_problem(scope)
            if problem is not None:
                answer = error_response(Request(scope), 400, problem)
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


def url_problem(scope: Scope) -> str | None:
    """Why the request's URL names nothing (one line), or None."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):  # a server without raw_path: its decoded path, escaped
        raw = quote(scope["path"], encoding="utf-8", errors="surrogateescape").encode()
    path = _text(raw)
    if path is None:
        return "the URL path is not UTF-8 text once its %-escapes are decoded"
    if any(ord(c) < 32 for c in path):  # in no id (event ids: events.id_problem)
        return "the URL path holds a control character (%00 to %1F)"
    if _text(bytes(scope.get("query_string", b"")).replace(b"+", b" ")) is None:
        return "the URL query is not UTF-8 text once its %-escapes are decoded"
    return None


def _text(escaped: bytes) -> str | None:
    try:
        return unquote_to_bytes(escaped).decode("utf-8")  # strict: no lone surrogates either
    except UnicodeDecodeError:
        return None
