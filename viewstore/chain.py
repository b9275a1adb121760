"""The per-conversation hash chain over the exact stored payloads.

Each event's hash covers the previous event's hash, its seq, its id and its exact JSON text,
so editing a payload, reordering, or deleting an event breaks the chain from that seq on.
"""

from __future__ import annotations

import hashlib

GENESIS = "0" * 64


def chain_hash(previous: str, seq: int, event_id: str, payload_json: str) -> str:
    digest = hashlib.sha256()
    for part in (previous, str(seq), event_id):
        digest.update(part.encode("utf-8"))
        digest.update(b"\n")
    digest.update(payload_json.encode("utf-8"))
    return digest.hexdigest()
