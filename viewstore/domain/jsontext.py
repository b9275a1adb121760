"""Strict JSON for event input: a nesting limit checked without recursion, no duplicate keys.

Python's ``json`` recurses once per nesting level, in C, on the caller's stack: a payload
nested a few thousand levels deep raises ``RecursionError`` while decoding or encoding, and
one that decodes at the top of a program can fail deeper in a call stack. SQLite's JSON
functions (which the analyst views use) refuse documents nested deeper than 1000 levels.
So events are limited to :data:`MAX_JSON_DEPTH` levels, measured before anything recurses:
on JSON text by counting brackets outside strings, on Python values by walking them with an
explicit stack.

A JSON object with the same key twice decodes, by default, to the last value, silently
dropping the first; for an audit log that is a lost field, so it is refused here.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

#: The deepest nesting an event may have; the event object itself is level 1.
MAX_JSON_DEPTH = 256

# A JSON string, or an unterminated one up to the end of the text. Each loop turn starts at a
# backslash and the end always matches, so a match never backtracks: linear in the text even
# for adversarial input such as a quote followed by a million escaped quotes.
_STRING = re.compile(r'"[^"\\]*(?:\\.?[^"\\]*)*(?:"|\Z)', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonTooDeepError(ValueError):
    """The value nests containers deeper than the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"JSON nested deeper than {limit} levels")


class DuplicateKeyError(ValueError):
    """A JSON object holds the same key twice."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"key {key!r} appears twice in one JSON object")


def check_text_depth(text: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JsonTooDeepError` if JSON ``text`` nests deeper than ``limit``.

    Brackets inside strings do not count. The scan only over-counts on text that is not JSON
    anyway, and never under-counts the levels ``json.loads`` would enter before it stopped.
    """
    if text.count("[") + text.count("{") <= limit:
        return  # the common case: too few brackets to reach the limit, whatever their order
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit:
        raise JsonTooDeepError(limit)


def check_value_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JsonTooDeepError` if dicts, lists and tuples nest deeper than ``limit``.

    Level by level, without recursion. Exact type checks first (``isinstance`` on every
    value cost five times as much on a typical event); subclasses, which ``json`` encodes
    too, are still caught by the slower check. A level is deduplicated by identity once it
    grows, so a value that refers to itself stops at the limit instead of doubling each level.
    """
    if not isinstance(value, _CONTAINERS):
        return
    level = [value]
    for _ in range(limit):
        level = [
            child
            for container in level
            for child in (container.values() if isinstance(container, dict) else container)
            if type(child) in _CONTAINER_TYPES
            or (type(child) not in _SCALAR_TYPES and isinstance(child, _CONTAINERS))
        ]
        if not level:
            return
        if len(level) > _DEDUPE_FROM:
            level = list({id(child): child for child in level}.values())
    raise JsonTooDeepError(limit)


_CONTAINERS = (dict, list, tuple)
_CONTAINER_TYPES = frozenset(_CONTAINERS)
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
_DEDUPE_FROM = 64


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_reject_constant)


def loads_strict(text: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for untrusted text: the depth limit first, then no duplicate keys and
    no ``NaN``/``Infinity``. Raises ``ValueError`` (one of the subclasses above, or
    ``json.JSONDecodeError``)."""
    check_text_depth(text, limit)
    return _DECODER.decode(text)
