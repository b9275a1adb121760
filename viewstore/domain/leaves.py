"""Leaf digests of redacted strings, and the check of a redacted payload against its chain hash.

An event appended under chain scheme 2 (``viewstore.domain.chain``) is hashed over its content root:
the digest of its JSON value with every string (object keys too) replaced by its leaf digest. A
redaction record keeps the leaf digests of the strings its round replaced, by JSON Pointer
(RFC 6901). ``verify`` rebuilds the root from the redacted payload, taking each string a
record names from the record (the payload must hold exactly the marker there) and every other
string's own digest: with the text digest of the original payload it must give the event's
chain hash. So a redacted payload may differ from what was hashed only at the recorded
pointers, and only by the marker; the record cannot vouch for anything else, whoever wrote it.

Pure: no SQL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from viewstore.domain.chain import leaf_digest, leaf_key, recorded, root_of
from viewstore.domain.events import canonical_json
from viewstore.domain.jsontext import loads_strict


def _escape(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _tokens(pointer: str) -> list[str]:
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON Pointer")
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def replaced(before: str, after: str, chain_key: bytes | None) -> dict[str, str]:
    """The leaf digests, by JSON Pointer in document order, of the strings of payload
    ``before`` that payload ``after`` replaced (a redaction changes strings only)."""
    key = leaf_key(chain_key)
    found: dict[str, str] = {}

    def walk(old: Any, new: Any, pointer: str) -> None:
        if type(old) is str and type(new) is str:
            if old != new:
                found[pointer] = leaf_digest(old, key)
        elif type(old) is dict and type(new) is dict and list(old) == list(new):
            for name, inner in old.items():
                walk(inner, new[name], f"{pointer}/{_escape(name)}")
        elif type(old) is list and type(new) is list and len(old) == len(new):
            for index, (inner, other) in enumerate(zip(old, new, strict=True)):
                walk(inner, other, f"{pointer}/{index}")
        elif old != new:
            raise ValueError(f"a redaction changed {pointer or '/'} beyond its strings")

    walk(json.loads(before), json.loads(after), "")
    return found


def encode(digests: Mapping[str, str]) -> str:
    """The record's column: a JSON object of leaf digests by pointer."""
    return canonical_json(dict(digests))


def decode(column: str) -> dict[str, str]:
    """The record's column read back; ``ValueError`` if it is not what ``encode`` writes."""
    value = loads_strict(column)
    if not isinstance(value, dict) or not all(
        isinstance(pointer, str) and isinstance(digest, str) for pointer, digest in value.items()
    ):
        raise ValueError("not a JSON object of leaf digests by pointer")
    return value


def redacted_root(
    payload: str, digests: Mapping[str, str], mark: str | Mapping[str, str], chain_key: bytes | None
) -> str:
    """The content root of the payload an event had before its redactions, rebuilt from its
    redacted ``payload`` and the recorded leaf ``digests`` of the strings they replaced.

    ``ValueError`` names what does not fit: a payload that is not the canonical text of its
    value (a second text of the same value could carry other bytes than the record vouched
    for), or a recorded pointer that does not reach a string that is exactly ``mark``."""
    value = loads_strict(payload)
    if canonical_json(value) != payload:
        raise ValueError("its payload is not the canonical JSON text of its value")
    for pointer, digest in digests.items():
        where = value
        tokens = _tokens(pointer)
        for depth, token in enumerate(tokens):
            if type(where) is dict and token in where:
                step: Any = token
            elif type(where) is list and token.isdigit() and int(token) < len(where):
                step = int(token)
            else:
                raise ValueError(f"recorded path {pointer} is not in its payload")
            if depth == len(tokens) - 1:
                expected = mark if isinstance(mark, str) else mark[pointer]
                if where[step] != expected or type(where[step]) is not str:
                    raise ValueError(f"recorded path {pointer} holds other than {expected!r}")
                where[step] = recorded(expected, digest)
            else:
                where = where[step]
    return root_of(value, leaf_key(chain_key), records=True)
