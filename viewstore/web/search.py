"""Full-text search for the page and the API: the URL read into ``EventStore.search``'s
arguments, and a snippet rendered with the query's words marked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup, escape
from starlette.requests import Request

from viewstore.domain.kinds import KIND_ROLES
from viewstore.domain.search import MAX_QUERY_LENGTH, WINDOWS
from viewstore.store import EventStore, SearchPage
from viewstore.web import params

_TOKEN = re.compile(r"\w+")
_PART = re.compile(r"[^\W_]+")
DEFAULT_LIMIT = 20
#: What the page's kind field suggests; any other kind is searched for just the same.
KINDS = sorted(KIND_ROLES)


@dataclass(frozen=True)
class Search:
    """A search as the URL asked for it (``query`` None: the page was opened without one)."""

    query: str | None
    conversation: str | None
    kinds: list[str]
    sources: list[str]
    window: str | None
    after: str | None
    limit: int

    def run(self, store: EventStore) -> SearchPage:
        return store.search(
            self.query or "",
            conversation_id=self.conversation,
            kinds=self.kinds or None,
            sources=self.sources or None,
            window=self.window,
            after=self.after,
            limit=self.limit,
        )

    def link(self, **changed: Any) -> str:
        """The page's URL for this search, ``changed`` replaced (``after=`` for the next)."""
        fields: dict[str, Any] = {
            "q": self.query or "",
            "conversation": self.conversation,
            "kind": ",".join(self.kinds) or None,
            "source": self.sources,
            "window": self.window,
            "limit": None if self.limit == DEFAULT_LIMIT else self.limit,
            **changed,
        }
        kept = {name: value for name, value in fields.items() if value not in (None, [], "")}
        return "/search?" + urlencode(kept, doseq=True)


def read(request: Request, *, split: bool = False) -> Search:
    """The search in the URL; ``split``: a kind may be several, comma-separated (the page's
    one kind field)."""
    raw = request.query_params.get("q")
    conversation = params.text(request, "conversation").strip()
    window = params.choice(request, "window", ("", *WINDOWS), "")
    return Search(
        query=None if raw is None else params.text(request, "q", limit=MAX_QUERY_LENGTH),
        conversation=conversation or None,
        kinds=params.texts(request, "kind", separator="," if split else None),
        sources=params.texts(request, "source"),
        window=window or None,
        after=params.cursor(request, "after"),
        limit=params.integer(request, "limit", DEFAULT_LIMIT) or 0,
    )


def marked(snippet: str, words: list[str]) -> Markup:
    """``snippet`` as HTML, each of ``words`` in it in ``<mark>``: every piece is escaped on
    its own, so a payload's text never becomes markup (nor is an entity cut by a mark)."""
    out, last = [], 0
    for start, end in _spans(snippet, set(words)):
        out.append(escape(snippet[last:start]))
        out.append(Markup("<mark>%s</mark>") % snippet[start:end])
        last = end
    out.append(escape(snippet[last:]))
    return Markup("").join(out)


def _spans(text: str, wanted: set[str]) -> Iterator[tuple[int, int]]:
    # The backends' tokenizers also split at "_", so "__init" is found by "init": mark that too.
    for token in _TOKEN.finditer(text):
        if token.group().lower() in wanted:
            yield token.span()
            continue
        for part in _PART.finditer(token.group()):
            if part.group().lower() in wanted:
                yield token.start() + part.start(), token.start() + part.end()
