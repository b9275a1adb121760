"""A small client of an OpenHands agent server's REST API: what a pull needs, over HTTP.

Facts it relies on (openhands-agent-server 1.58, ``event_router.py``/``event_service.py``):
``GET /api/conversations/{id}/events/search`` walks the log in its on-disk order, at most 100
events a page; ``page_id`` is inclusive (a page asked for from event X starts with X) and an
unknown ``page_id`` silently starts from the beginning, so a caller checks the first item.
Items are ``model_dump(mode="json", exclude_none=True)``. ``GET /api/conversations/search``
pages the server's conversations the same way. With session keys configured every call
needs ``X-Session-API-Key``.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from viewstore.domain.errors import AgentServerError
from viewstore.ingest.sources import Source

PAGE_LIMIT = 100  # the server's own maximum
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
READ_CHUNK = 64 * 1024


@dataclass(frozen=True)
class EventPage:
    items: list[dict[str, Any]]
    next_page_id: str | None


class AgentServerClient:
    """Reads one agent server (``source``); every failure is an ``AgentServerError``."""

    def __init__(self, source: Source, *, timeout: float | None = None) -> None:
        self.source = source
        self.timeout = timeout if timeout is not None else source.timeout

    def events(self, conversation: str, *, page_id: str | None, limit: int) -> EventPage:
        """One page of the conversation's log (``conversation``: hex or dashed UUID)."""
        query: dict[str, Any] = {"limit": max(1, min(limit, PAGE_LIMIT))}
        if page_id is not None:
            query["page_id"] = page_id
        path = f"/api/conversations/{quote(conversation, safe='')}/events/search"
        body = self._get(path, query)
        return _page(body, self.source.name, path)

    def event_count(self, conversation: str) -> int:
        path = f"/api/conversations/{quote(conversation, safe='')}/events/count"
        body = self._get(path, {})
        if not isinstance(body, int) or isinstance(body, bool):
            raise AgentServerError(self.source.name, f"GET {path}: not a count")
        return body

    def conversation(self, conversation: str) -> dict[str, Any]:
        """The conversation's ``ConversationInfo``."""
        path = f"/api/conversations/{quote(conversation, safe='')}"
        body = self._get(path, {})
        if not isinstance(body, dict):
            raise AgentServerError(self.source.name, f"GET {path}: not a conversation")
        return body

    def conversations(self, *, page_id: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the server's conversations (their ``ConversationInfo`` objects)."""
        query: dict[str, Any] = {"limit": PAGE_LIMIT}
        if page_id is not None:
            query["page_id"] = page_id
        page = _page(self._get("/api/conversations/search", query), self.source.name, "search")
        return page.items, page.next_page_id

    def _get(self, path: str, query: dict[str, Any]) -> Any:
        target = path + (f"?{urlencode(query)}" if query else "")
        what = f"GET {path}"
        # The whole call has one deadline: a socket timeout alone bounds each read, and a
        # server that trickles its answer a byte at a time would hold the pull for ever.
        deadline = time.monotonic() + self.timeout
        parts = urlsplit(self.source.url)
        kind = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        connection = kind(parts.netloc, timeout=self.timeout)
        headers = {"Accept": "application/json"}
        if self.source.session_api_key:
            headers["X-Session-API-Key"] = self.source.session_api_key
        try:
            connection.request("GET", parts.path + target, headers=headers)
            _wait_until(connection, deadline)
            response = connection.getresponse()
            raw = _read_until(connection, response, deadline)
        except (OSError, http.client.HTTPException, ValueError) as error:
            raise AgentServerError(self.source.name, f"{what} failed: {_reason(error)}") from error
        finally:
            connection.close()
        if response.status != 200:
            raise AgentServerError(
                self.source.name, f"{what} answered HTTP {response.status}", status=response.status
            )
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as error:
            raise AgentServerError(self.source.name, f"{what}: not JSON") from error


def _read_until(
    connection: http.client.HTTPConnection, response: http.client.HTTPResponse, deadline: float
) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        _wait_until(connection, deadline)
        chunk = response.read1(READ_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ValueError("the answer is too large")
        chunks.append(chunk)


def _wait_until(connection: http.client.HTTPConnection, deadline: float) -> None:
    """The next socket operation may block until ``deadline`` at most."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no complete answer within the time limit")
    if connection.sock is not None:
        connection.sock.settimeout(left)


def _reason(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return " ".join(text.split())[:200]


def _page(body: Any, source: str, what: str) -> EventPage:
    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        raise AgentServerError(source, f"{what}: not a page of items")
    items = body["items"]
    if not all(isinstance(item, dict) and isinstance(item.get("id"), str) for item in items):
        raise AgentServerError(source, f"{what}: an item without an id")
    next_page_id = body.get("next_page_id")
    if next_page_id is not None and not isinstance(next_page_id, str):
        raise AgentServerError(source, f"{what}: next_page_id is not a string")
    return EventPage(items, next_page_id)
