"""Random JSON values and the JSON Pointers (RFC 6901) of their strings: what the tests of the
content root and of redaction draw and change."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_values(text: int, keys: int, leaves: int) -> st.SearchStrategy[Any]:
    """Any JSON value: strings up to ``text`` characters, object keys up to ``keys``."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=text),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=keys), inner, max_size=4)
        ),
        max_leaves=leaves,
    )


def string_pointers(value: Any, pointer: str = "") -> list[str]:
    """The pointer of every string value in ``value``, in document order."""
    if isinstance(value, str):
        return [pointer]
    if isinstance(value, dict):
        items = [(k.replace("~", "~0").replace("/", "~1"), v) for k, v in value.items()]
    elif isinstance(value, list):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return []
    return [
        found for token, inner in items for found in string_pointers(inner, f"{pointer}/{token}")
    ]


def _tokens(pointer: str) -> list[str]:
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _walk(value: Any, tokens: list[str]) -> Any:
    for token in tokens:
        value = value[int(token) if isinstance(value, list) else token]
    return value


def at(value: Any, pointer: str) -> Any:
    """What ``pointer`` reaches in ``value``."""
    return _walk(value, _tokens(pointer))


def put(value: Any, pointer: str, new: Any) -> Any:
    """``value`` with what ``pointer`` reaches replaced by ``new`` (in place)."""
    tokens = _tokens(pointer)
    parent = _walk(value, tokens[:-1])
    parent[int(tokens[-1]) if isinstance(parent, list) else tokens[-1]] = new
    return value
