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

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from viewstore.errors import AgentServerError
from viewstore.ingest.sources import Source

PAGE_LIMIT = 100  # the server's own maximum
DEFAULT_TIMEOUT = 30.0
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class EventPage:
    items: list[dict[str, Any]]
    next_page_id: str | None


class AgentServerClient:
    """Reads one agent server (``source``); every failure is an ``AgentServerError``."""

    def __init__(self, source: Source, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.source = source
        self.timeout = timeout

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
        url = self.source.url + path + (f"?{urlencode(query)}" if query else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self.source.session_api_key:
            request.add_header("X-Session-API-Key", self.source.session_api_key)
        what = f"GET {path}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as error:
            status = error.code
            error.close()
            raise AgentServerError(self.source.name, f"{what} answered HTTP {status}") from error
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise AgentServerError(self.source.name, f"{what} failed: {reason}") from error
        if len(raw) > MAX_RESPONSE_BYTES:
            raise AgentServerError(self.source.name, f"{what}: the answer is too large")
        try:
            return json.loads(raw)
        except ValueError as error:
            raise AgentServerError(self.source.name, f"{what}: not JSON") from error


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
