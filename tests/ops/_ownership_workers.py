"""Worker processes of tests/ops/test_ownership_race.py (spawn context): each is one agent
server's ingest, claiming, describing and appending to the same conversations as the others,
while one more worker hands conversations over and erases some."""

from __future__ import annotations

import random
from typing import Any

from viewstore import ConcurrencyError, ConversationErasedError, ConversationOwnedError, EventStore
from viewstore.store.records import SourceInfo

from ._helpers import message


def ingest_worker(url: str, source: str, conversations: list[str], seed: int) -> dict[str, Any]:
    """Claim each conversation, say what it is, and append to it while it is ours."""
    rng = random.Random(seed)
    won: list[str] = []
    refused = 0
    appended: list[tuple[str, str]] = []
    with EventStore(url) as store:
        for round_ in range(3):
            for key in rng.sample(conversations, len(conversations)):
                try:
                    store.claim_conversation(key, source)
                    store.save_conversation_info(SourceInfo(key, source, title=f"{source}"))
                    event_id = f"{source}-{key}-{round_}"
                    store.append(key, [message(event_id)])
                    appended.append((key, event_id))
                    if round_ == 0:
                        won.append(key)
                except (ConversationOwnedError, ConversationErasedError):
                    refused += 1
                except ConcurrencyError:
                    pass
    return {"source": source, "won": won, "refused": refused, "appended": appended}


def operator_worker(url: str, conversations: list[str], seed: int) -> dict[str, Any]:
    """Hand some conversations over to a source of its own, erase others."""
    rng = random.Random(seed)
    handed: list[str] = []
    erased: list[str] = []
    with EventStore(url) as store:
        for key in rng.sample(conversations, len(conversations)):
            try:
                if key.endswith(("0", "1")):
                    store.erase(key, reason="race")
                    erased.append(key)
                else:
                    store.hand_over(key, "operator")
                    handed.append(key)
            except (LookupError, ConversationErasedError):
                pass
    return {"handed": handed, "erased": erased}
