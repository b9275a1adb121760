"""Security headers and an optional bearer token, shared by the viewer and the ingest.

``SecurityMiddleware`` is plain ASGI: it adds to every HTTP answer

- ``Content-Security-Policy``: scripts, styles and fetches from the app's own origin only, no
  plugins, no ``<base>``, not framed (``frame-ancestors 'none'``);
- ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy:
  no-referrer``;

and, when given a token, answers 401 to any request that does not carry it. The viewer
(``VIEWSTORE_SERVE_TOKEN``) accepts it as ``Authorization: Bearer <token>``, or from a browser
as ``?token=<token>`` once: that answer sets an HttpOnly, SameSite=Strict cookie and redirects
to the same address without the token, and the cookie carries it from then on. The ingest
(``VIEWSTORE_INGEST_TOKEN``) takes the header only. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
COOKIE = "viewstore_token"
QUERY = "token"


def token_matches(given: str | None, expected: str) -> bool:
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            text = bytes(value).decode("latin-1")
            scheme, _, credentials = text.partition(" ")
            if scheme.lower() == "bearer":
                return credentials.strip()
    return None


class SecurityMiddleware:
    """Security headers on every answer; with ``token``, a 401 without it. ``browser``: also
    accept the token as a query parameter (once) and a cookie (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str | None = None, browser: bool = False) -> None:
        self.app = app
        self.token = token or None
        self.browser = browser

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in HEADERS if n not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        if self.token is not None:
            refused = self._check(scope)
            if refused is not None:
                status, headers, body = refused
                await send_with_headers(
                    {"type": "http.response.start", "status": status, "headers": headers}
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send_with_headers)

    def _check(self, scope: Scope) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        """None when the request may pass, else the answer: (status, headers, body)."""
        assert self.token is not None
        if token_matches(bearer(scope), self.token):
            return None
        if self.browser:
            if token_matches(_cookie(scope), self.token):
                return None
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            given = [value for name, value in query if name == QUERY]
            if given and token_matches(given[-1], self.token):
                rest = urlencode([(n, v) for n, v in query if n != QUERY])
                location = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
                cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                return (
                    303,
                    [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
                    b"",
                )
        body = json.dumps(
            {"error": "missing or wrong token (Authorization: Bearer <token>)", "status": 401}
        ).encode()
        return (
            401,
            [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="viewstore"'),
            ],
            body,
        )


def _cookie(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header is no token
                return None
            morsel = jar.get(COOKIE)
            if morsel is not None:
                return str(morsel.value)
    return None
