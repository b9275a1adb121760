"""What a full-text search looks for, and the snippet a hit shows (docs/search.md). Pure: the
statements are viewstore/store/read/search.py's.

A query is its words: runs of letters, digits and underscores, lowercased; an event matches
when its string values (never its keys) hold every word, as the backend's own full-text
search splits them (PostgreSQL's ``simple`` configuration, SQLite FTS5's ``unicode61``). The
snippet is cut from the first string that holds a word, around it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from viewstore.domain.errors import InvalidArgumentError
from viewstore.domain.masking import MARK_PREFIX
from viewstore.domain.scrub import MARKS

_WORD = re.compile(r"\w+")
MAX_WORDS = 16
MAX_QUERY_LENGTH = 500
SNIPPET_WIDTH = 160
#: Where the window of a hit is asked about: in the live view now, or forgotten (it entered a
#: view and a condensation took it out).
WINDOWS = ("live", "forgotten")


def words(query: object) -> list[str]:
    """The words a query asks for, in order, each once; ``InvalidArgumentError`` when it has
    none or is too long."""
    if not isinstance(query, str):
        raise InvalidArgumentError(f"a search query must be text, got {type(query).__name__}")
    if len(query) > MAX_QUERY_LENGTH:
        raise InvalidArgumentError(f"a search query is at most {MAX_QUERY_LENGTH} characters")
    found = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    if not found:
        raise InvalidArgumentError(
            f"a search query needs a word (letters or digits), got {query!r}"
        )
    if len(found) > MAX_WORDS:
        raise InvalidArgumentError(f"a search query has at most {MAX_WORDS} words")
    return found


def check_window(window: object) -> str | None:
    if window is None or window in WINDOWS:
        return window
    raise InvalidArgumentError(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if value not in MARKS and not value.startswith(MARK_PREFIX):
            yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def snippet(payload_json: str, wanted: list[str], width: int = SNIPPET_WIDTH) -> str:
    """About ``width`` characters of the event's text around the first of ``wanted`` it
    holds, on one line ("" when no string holds one: the words were in a kind or an id)."""
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in wanted) + r")\b", re.IGNORECASE)
    for text in _strings(json.loads(payload_json)):
        found = pattern.search(text)
        if found is None:
            continue
        start = max(0, found.start() - width // 3)
        end = min(len(text), start + width)
        cut = " ".join(text[start:end].split())
        return ("…" if start > 0 else "") + cut + ("…" if end < len(text) else "")
    return ""
