"""The per-conversation hash chain over the exact stored payloads.

Each event's hash covers the previous event's hash, its seq, its id and its exact JSON text,
so editing a payload, reordering, or deleting an event breaks the chain from that seq on.

By default the hash is a plain SHA-256, which anyone can recompute after an edit. With a chain
key (a secret the writers hold and the database never sees) it is an HMAC-SHA256 of the same
text: only a key holder can produce a hash that verifies (docs/threat-model.md).
"""

from __future__ import annotations

import hashlib
import hmac
import os

from viewstore.errors import InvalidArgumentError

GENESIS = "0" * 64
#: Where the chain key comes from when a store is given none.
CHAIN_KEY_ENV = "VIEWSTORE_CHAIN_KEY"


def resolve_key(value: str | bytes | None) -> bytes | None:
    """The chain key to use: ``value``, else ``VIEWSTORE_CHAIN_KEY``, else none (plain SHA-256)."""
    if value is None:
        value = os.environ.get(CHAIN_KEY_ENV) or None
    if value is None:
        return None
    if not isinstance(value, str | bytes) or not value:
        raise InvalidArgumentError("chain_key must be a non-empty string or bytes")
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def chain_hash(
    previous: str, seq: int, event_id: str, payload_json: str, key: bytes | None = None
) -> str:
    digest = hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)
    for part in (previous, str(seq), event_id):
        digest.update(part.encode("utf-8"))
        digest.update(b"\n")
    digest.update(payload_json.encode("utf-8"))
    return digest.hexdigest()
