"""Security headers and an optional bearer token, shared by the viewer and the ingest.

``SecurityMiddleware`` is plain ASGI: it adds to every HTTP answer

- ``Content-Security-Policy``: scripts, styles and fetches from the app's own origin only, no
  plugins, no ``<base>``, not framed (``frame-ancestors 'none'``);
- ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy:
  no-referrer``;

and, when given a token, answers 401 to any request that does not carry it. The viewer
(``VIEWSTORE_SERVE_TOKEN``) accepts it as ``Authorization: Bearer <token>``, or from a browser
as ``?token=<token>`` once: that answer sets an HttpOnly, SameSite=Strict cookie and redirects
to the same address without the token, and the cookie carries it from then on. That address is
always a path on this site: it is rebuilt from the raw request target (``raw_path``, escapes
kept, so an id holding ``?``, ``#`` or ``%2F`` stays whole), anything outside the URL's safe
characters is percent-encoded (a backslash too) and leading slashes collapse into one, so no
browser reads it as another host (``//evil.example/``, ``/\\evil.example/``). A path holding a
control character (``%0D%0A``, ``%00``) gets a one-line 400 instead. The ingest
(``VIEWSTORE_INGEST_TOKEN``) takes the header only. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote, unquote_plus

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
            given, rest = _split_token(scope.get("query_string", b""))
            if given and token_matches(given[-1], self.token):
                if _CONTROL.search(scope["path"]):
                    return _one_line(400, "the request path holds a control character")
                location = _site_path(scope) + (f"?{rest}" if rest else "")
                cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                return (
                    303,
                    [
                        (b"location", location.encode()),
                        (b"set-cookie", cookie.encode()),
                        (b"content-length", b"0"),
                    ],
                    b"",
                )
        status, headers, body = _one_line(
            401, "missing or wrong token (Authorization: Bearer <token>)"
        )
        return status, [*headers, (b"www-authenticate", b'Bearer realm="viewstore"')], body


def _one_line(status: int, message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"error": message, "status": status}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    return status, headers, body


_CONTROL = re.compile("[\x00-\x1f\x7f]")
# Bytes a path (or a query) may carry as they are: RFC 3986's unreserved and sub-delims, ":",
# "@", "/" (and "?" in a query), and "%" when it starts an escape. Every other byte is escaped,
# so the Location header holds ASCII only and a backslash cannot pass for a slash.
_PATH_UNSAFE = re.compile(rb"%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]")
_QUERY_UNSAFE = re.compile(rb"%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]")


def _escaped(raw: bytes, unsafe: re.Pattern[bytes]) -> str:
    return unsafe.sub(lambda match: b"%%%02X" % match.group()[0], raw).decode("ascii")


def _site_path(scope: Scope) -> str:
    """This request's path as the browser sent it, made a path of this site only."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):  # a server without raw_path: escape the decoded path again
        raw = quote(scope["path"], safe="/", encoding="utf-8", errors="surrogateescape").encode()
    root = quote(scope.get("root_path", ""), safe="/").encode()
    if root and not raw.startswith(root):  # uvicorn puts root_path into raw_path, others not
        raw = root + raw
    # One leading slash only: "//host/..." is another site to a browser, and so is an
    # absolute-form target ("http://host/...", which servers pass on as the path).
    return "/" + _escaped(raw, _PATH_UNSAFE).lstrip("/")


def _split_token(query: bytes) -> tuple[list[str], str]:
    """The ``token`` values of a raw query string, and the rest of it as it came (escaped
    where it was not safe), so that the redirect keeps every other parameter byte for byte."""
    given: list[str] = []
    kept: list[str] = []
    for pair in query.split(b"&"):
        if not pair:
            continue
        name, _, value = pair.partition(b"=")
        if unquote_plus(name.decode("latin-1")) == QUERY:
            given.append(unquote_plus(value.decode("latin-1")))
        else:
            kept.append(_escaped(pair, _QUERY_UNSAFE))
    return given, "&".join(kept)


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
