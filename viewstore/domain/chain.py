"""The per-conversation hash chain over the exact stored payloads.

Each event's hash covers the previous event's hash, its seq, its id and its exact JSON text,
so editing a payload, reordering, or deleting an event breaks the chain from that seq on.

By default the hash is a plain SHA-256, which anyone can recompute after an edit. With a chain
key (a secret the writers hold and the database never sees) it is an HMAC-SHA256 of the same
text: only a key holder can produce a hash that verifies (docs/threat-model.md).

Two schemes (docs/lifecycle.md, "The hash chain across a redacted event"):

- **Scheme 1** (events appended before chain scheme 2 existed): the hash is taken over the
  payload text itself.
- **Scheme 2** (every event appended now): over the SHA-256 of the payload text *and* its
  *content root*: the SHA-256 of the canonical JSON of the payload's value with every string
  value replaced by its leaf digest. The text digest binds the exact bytes, as scheme 1 does;
  the root is what lets ``verify`` check a redacted payload against what was committed at
  append time: rebuilt from the redacted payload with the recorded leaf digests of the
  replaced strings, it gives the same root only if nothing else changed.

Both bind the exact text of an unredacted event, so ``verify`` accepts either there (a scheme-2
hash input starts with ``2``, a scheme-1 one with the ``{`` of a JSON object: no input is both).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any

from viewstore.domain.errors import InvalidArgumentError

GENESIS = "0" * 64
#: Where the chain key comes from when a store is given none.
CHAIN_KEY_ENV = "VIEWSTORE_CHAIN_KEY"
_SCHEME_2 = b"2\n"
# The leaf digests of a keyed store are keyed by a key derived from the chain key, not by the
# chain key itself: a leaf digest is an HMAC of a string a user chose, published in a
# redaction record, and must never double as a chain hash.
_LEAF_KEY_LABEL = b"viewstore leaf digests"
# ``canonical_json``'s settings (viewstore.domain.events), built once: json.dumps with arguments
# builds an encoder per call, a third of the root's cost on a typical event.
_CANONICAL = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False
)
# Leaf digests of short strings (kinds, roles, tool names: most strings of most events) are
# reused rather than recomputed; long ones (what anyone said) are not kept in memory.
_CACHED_LENGTH = 64
_CACHE_SIZE = 4096
_leaf_cache: dict[bytes | None, dict[str, str]] = {}


def resolve_key(value: str | bytes | None) -> bytes | None:
    """The chain key to use: ``value``, else ``VIEWSTORE_CHAIN_KEY``, else none (plain SHA-256)."""
    if value is None:
        value = os.environ.get(CHAIN_KEY_ENV) or None
    if value is None:
        return None
    if not isinstance(value, str | bytes) or not value:
        raise InvalidArgumentError("chain_key must be a non-empty string or bytes")
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _hasher(key: bytes | None) -> Any:
    return hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)


def _head(previous: str, seq: int, event_id: str, key: bytes | None) -> Any:
    digest = _hasher(key)
    for part in (previous, str(seq), event_id):
        digest.update(part.encode("utf-8"))
        digest.update(b"\n")
    return digest


def chain_hash(
    previous: str, seq: int, event_id: str, payload_json: str, key: bytes | None = None
) -> str:
    """Scheme 1: over the payload text itself."""
    digest = _head(previous, seq, event_id, key)
    digest.update(payload_json.encode("utf-8"))
    return str(digest.hexdigest())


def chain_hash2(
    previous: str, seq: int, event_id: str, text_digest: str, root: str, *, key: bytes | None
) -> str:
    """Scheme 2: over the payload's text digest and its content root."""
    digest = _head(previous, seq, event_id, key)
    digest.update(_SCHEME_2 + text_digest.encode("ascii") + b"\n" + root.encode("ascii"))
    return str(digest.hexdigest())


def text_digest(payload_json: str) -> str:
    """The SHA-256 of a payload's UTF-8 text (``scrub.digest``, the records' digests)."""
    return hashlib.sha256(payload_json.encode("utf-8")).hexdigest()


def leaf_key(key: bytes | None) -> bytes | None:
    """The key of the leaf digests: derived from the chain key (None: plain SHA-256)."""
    return None if key is None else hmac.digest(key, _LEAF_KEY_LABEL, "sha256")


def leaf_digest(value: str, key: bytes | None) -> str:
    """One string's leaf digest; ``key`` is a ``leaf_key``."""
    cache = _leaf_cache.get(key)
    if cache is None:
        cache = _leaf_cache.setdefault(key, {})
    found = cache.get(value)
    if found is not None:
        return found
    # surrogatepass: a tampered payload may hold a lone surrogate; its digest then simply
    # does not match, where an encoding error would stop verify.
    data = value.encode("utf-8", "surrogatepass")
    found = (
        hashlib.sha256(data).hexdigest() if key is None else hmac.digest(key, data, "sha256").hex()
    )
    if len(value) <= _CACHED_LENGTH:
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[value] = found
    return found


def leaves(value: Any, key: bytes | None) -> Any:
    """``value`` (a parsed JSON value) with every string value, not object keys, replaced by
    its leaf digest. Exact type checks: a parsed value holds only JSON's own types."""
    kind = type(value)
    if kind is dict:
        return {
            name: leaf_digest(inner, key) if type(inner) is str else leaves(inner, key)
            for name, inner in value.items()
        }
    if kind is list:
        return [
            leaf_digest(inner, key) if type(inner) is str else leaves(inner, key) for inner in value
        ]
    if kind is str:
        return leaf_digest(value, key)
    return value


def root_of_leaves(tree: Any) -> str:
    """The content root of a ``leaves`` tree: the SHA-256 of its canonical JSON text."""
    return hashlib.sha256(_CANONICAL.encode(tree).encode("utf-8", "surrogatepass")).hexdigest()


def content_root(payload_json: str, key: bytes | None = None) -> str:
    """The content root of a payload (``key``: the chain key, or None).

    Parsed from the stored text, as ``verify`` parses it, rather than taken from the object an
    append was given: that object may hold what JSON writes alike but a walk would not (tuples,
    ``str`` subclasses, keys that are not strings)."""
    return root_of_leaves(leaves(json.loads(payload_json), leaf_key(key)))


def event_hash(
    previous: str, seq: int, event_id: str, payload_json: str, key: bytes | None = None
) -> str:
    """The hash an event is appended with (scheme 2)."""
    root = content_root(payload_json, key)
    return chain_hash2(previous, seq, event_id, text_digest(payload_json), root, key=key)


def hash_matches(
    stored: str, previous: str, seq: int, event_id: str, payload_json: str, *, key: bytes | None
) -> bool:
    """Whether ``stored`` is the hash of this unredacted event under either scheme.

    Scheme 1 is tried first because it costs one pass over the text, where scheme 2 parses
    the payload: trying it first wastes little on a new event, and skips the parse on every
    event appended before scheme 2."""
    if chain_hash(previous, seq, event_id, payload_json, key) == stored:
        return True
    try:
        return event_hash(previous, seq, event_id, payload_json, key) == stored
    except (ValueError, TypeError, RecursionError):  # a tampered payload that is not JSON
        return False
