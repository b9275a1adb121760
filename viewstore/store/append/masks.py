"""The ``masks`` rows: what masking changed in each appended event (docs/masking.md).

A row is written in its event's append, beside the log row, and hashed over that row's chain
hash: a record moved to another event, or claiming other strings, no longer verifies
(``viewstore.store.audit.masks_check``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, insert, select

from viewstore.domain.chain import chain_hash
from viewstore.domain.events import canonical_json
from viewstore.domain.masking import Masked, decode, encode
from viewstore.store.database.schema import masks
from viewstore.store.read import lineage
from viewstore.store.records import MaskRecord


def record_hash(
    conversation_id: str,
    seq: int,
    event_id: str,
    masked: str,
    event_hash: str,
    *,
    key: bytes | None,
) -> str:
    # Tagged by its key, so no record of another table hashes to the same input.
    fields = canonical_json({"masks": masked, "conversation_id": conversation_id})
    return chain_hash(event_hash, seq, event_id, fields, key)


def rows(
    log: Sequence[Mapping[str, Any]],
    found: Mapping[str, tuple[Masked, ...]],
    key: bytes | None,
) -> list[dict[str, Any]]:
    """The rows of the masked events among ``log`` (the batch's ``events`` rows)."""
    out = []
    for row in log:
        items = found.get(row["event_id"])
        if not items:
            continue
        masked = encode(items)
        out.append(
            {
                "conversation_id": row["conversation_id"],
                "seq": row["seq"],
                "event_id": row["event_id"],
                "masked": masked,
                "record_hash": record_hash(
                    row["conversation_id"],
                    row["seq"],
                    row["event_id"],
                    masked,
                    row["hash"],
                    key=key,
                ),
            }
        )
    return out


def insert_rows(conn: Connection, values: list[dict[str, Any]]) -> None:
    if values:
        conn.execute(insert(masks), values)


def _record(row: Any) -> MaskRecord:
    return MaskRecord(
        conversation_id=row.conversation_id,
        seq=int(row.seq),
        event_id=row.event_id,
        masked=decode(row.masked),
        record_hash=row.record_hash,
    )


def lineage_records(conn: Connection, conv: Any) -> list[MaskRecord]:
    """The records of the events of the conversation ``conv`` (its row), its shared prefix
    included, in seq order."""
    found: list[MaskRecord] = []
    for segment in lineage.segments(conn, conv):
        query = select(masks).where(
            masks.c.conversation_id == segment.conversation_id, masks.c.seq > segment.after
        )
        if segment.upto is not None:
            query = query.where(masks.c.seq <= segment.upto)
        found.extend(_record(row) for row in conn.execute(query))
    return sorted(found, key=lambda record: record.seq)
