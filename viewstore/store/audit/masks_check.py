"""What ``verify`` checks of the masking records (docs/masking.md): each names the event at its
seq, its hash binds it to that event's chain hash, and (unless a redaction removed them since)
the strings it names still hold its rules' marks."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from viewstore.domain.masking import MARK_PREFIX, encode
from viewstore.store.append.masks import record_hash
from viewstore.store.records import MaskRecord


def _at(value: Any, path: str) -> Any:
    for raw in path[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return None
    return value


def check(
    records: Iterable[MaskRecord],
    stored: Sequence[Any],
    redacted: Iterable[int],
    chain_key: bytes | None,
) -> list[str]:
    """Problems with ``records`` against the log rows ``stored`` (seq 1 first); ``redacted``:
    the seqs with a redaction record, whose marks may be gone."""
    problems = []
    changed = set(redacted)
    for record in records:
        where = f"masks: the record of seq {record.seq}"
        row = stored[record.seq - 1] if 0 < record.seq <= len(stored) else None
        if row is None or row.event_id != record.event_id:
            problems.append(f"{where} names event {record.event_id!r}, not the event there")
            continue
        expected = record_hash(
            record.conversation_id,
            record.seq,
            record.event_id,
            encode(record.masked),
            row.hash,
            key=chain_key,
        )
        if expected != record.record_hash:
            problems.append(f"{where} (event {record.event_id!r}) was altered or moved")
            continue
        if record.seq in changed:
            continue
        payload = json.loads(row.payload)
        for item in record.masked:
            found = _at(payload, item.path)
            mark = f"{MARK_PREFIX}{item.rule}]"
            if not isinstance(found, str) or found.count(mark) < item.count:
                problems.append(
                    f"{where} (event {record.event_id!r}) says {item.path} holds {item.count} "
                    f"{mark}, and it does not"
                )
    return problems
