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
  *content root*: the SHA-256 of the canonical JSON of the payload's value with every string,
  object keys included, replaced by its leaf digest. The text digest binds the exact bytes, as
  scheme 1 does; the root is what lets ``verify`` check a redacted payload against what was
  committed at append time: rebuilt from the redacted payload with the recorded leaf digests
  of the replaced strings, it gives the same root only if nothing else changed.

Both bind the exact text of an unredacted event, so ``verify`` accepts either there (a scheme-2
hash input starts with ``2``, a scheme-1 one with the ``{`` of a JSON object: no input is both).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterable
from json.encoder import _make_iterencode  # type: ignore[attr-defined]
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
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


def _digest(value: str, key: bytes | None) -> str:
    # surrogatepass: a tampered payload may hold a lone surrogate; its digest then simply
    # does not match, where an encoding error would stop verify.
    data = value.encode("utf-8", "surrogatepass")
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.digest(key, data, "sha256").hex()


def _kept(cache: dict[str, str], value: str, found: str) -> str:
    """``found``, kept in ``cache`` under ``value`` if the string is short."""
    if len(value) <= _CACHED_LENGTH:
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[value] = found
    return found


def leaf_digest(value: str, key: bytes | None) -> str:
    """One string's leaf digest; ``key`` is a ``leaf_key``."""
    cache = _leaf_cache.get(key)
    if cache is None:
        cache = _leaf_cache.setdefault(key, {})
    found = cache.get(value)
    return found if found is not None else _kept(cache, value, _digest(value, key))


class Recorded(str):
    """A string of a redacted payload whose leaf digest is not its own but the one a
    redaction record kept for the string it replaced (``viewstore.domain.leaves``)."""

    digest: str


def recorded(marker: str, digest: str) -> Recorded:
    """``marker`` standing for a removed string whose leaf digest was ``digest``."""
    value = Recorded(marker)
    value.digest = digest
    return value


def _digest_writer(key: bytes | None, records: bool) -> Callable[[Any, int], Iterable[str]]:
    """The canonical encoder with every string, object keys included, written as its leaf
    digest in quotes: the text the content root hashes, made in the encoder's one walk of the
    value instead of a walk that builds a tree of digests and a second that encodes it."""
    # The quoted digests of short strings (keys, kinds, roles, tool names: most strings of most
    # events) are kept, here rather than through leaf_digest: the encoder calls this for every
    # string, about 30 a typical event, and the call's own cost is most of a cache hit's.
    known: dict[str, str] = {}

    def quoted(text: str) -> str:
        # A Recorded string equals its marker, whose own digest may be known: it is asked
        # first, by the writer of redacted payloads only (the append's never meets one).
        if records and type(text) is Recorded:
            return f'"{text.digest}"'
        found = known.get(text)
        return found if found is not None else _kept(known, text, f'"{_digest(text, key)}"')

    if _c_make_encoder is not None:
        writer: Callable[[Any, int], Iterable[str]] = _c_make_encoder(
            None, None, quoted, None, ":", ",", False, False, False
        )
        return writer
    # The same text without the C accelerator (an interpreter built without it).
    return _make_iterencode(  # type: ignore[no-any-return]
        None, None, quoted, None, float.__repr__, ":", ",", False, False, False
    )


_writers: dict[tuple[bytes | None, bool], Callable[[Any, int], Iterable[str]]] = {}


def root_of(value: Any, key: bytes | None, *, records: bool = False) -> str:
    """The content root of a parsed JSON value: the SHA-256 of its canonical JSON text with
    every string, object keys included, replaced by its leaf digest; ``key`` is a
    ``leaf_key``. With ``records``, a ``Recorded`` string counts as the digest it carries."""
    writer = _writers.get((key, records))
    if writer is None:
        writer = _writers.setdefault((key, records), _digest_writer(key, records))
    # Every string became 64 hex digits: the text is ASCII.
    return hashlib.sha256("".join(writer(value, 0)).encode("ascii")).hexdigest()


def content_root(payload_json: str, key: bytes | None = None) -> str:
    """The content root of a payload (``key``: the chain key, or None).

    Parsed from the stored text, as ``verify`` parses it, rather than taken from the object an
    append was given: that object may hold what JSON writes alike but reads back otherwise (a
    key given as the number 1 beside the key "1")."""
    return root_of(json.loads(payload_json), leaf_key(key))


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
