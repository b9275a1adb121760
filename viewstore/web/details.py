"""Data for the list, condensation, audit and event pages (see ``model`` for the view)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store import EXACT_COUNT_LIMIT, ConversationInfo, EventStore, Order
from viewstore.web.content import parse
from viewstore.web.model import NotFound, _view, event_row, sequence_diff

PAGE = 50
#: The header counts exactly up to this many conversations (the server's estimate); above it,
#: on PostgreSQL, it shows the estimate ("about N"): a count there reads every row.
EXACT_COUNT_UP_TO = EXACT_COUNT_LIMIT
#: The list's sort keys (the viewer's URL words) and the catalogue order each stands for.
SORTS: dict[str, Order] = {
    "id": "id",
    "updated": "updated_at",
    "created": "created_at",
    "events": "version",
    "view": "view_length",
}


def list_data(
    store: EventStore,
    *,
    search: str,
    sort: str,
    descending: bool,
    offset: int = 0,
    after: str | None = None,
    before: str | None = None,
    limit: int = PAGE,
) -> dict[str, Any]:
    """A page of the list: the first (or ``offset``'s, kept for old links), the one after the
    keyset cursor ``after`` (the next page), or the one before ``before`` (the previous page:
    a cursor of the reverse order, read forwards from it and turned round). Each page carries
    its ``next_cursor`` and ``prev_cursor`` (None: no such page); a deep page costs what the
    first does. ``total`` is the count, or on a large PostgreSQL store the planner's estimate
    (``total_exact`` false: the page says "about")."""
    if after is not None and before is not None:
        raise InvalidArgumentError("give after or before, not both")
    order = SORTS[sort]
    options: dict[str, Any] = {"search": search, "order_by": order}
    rows: list[ConversationInfo] = []
    more_before = more_after = False
    position: int | None = None  # of the first row, where known (not on a keyset page)
    if before is not None:
        found = store.conversations(
            descending=not descending, after=before, limit=limit + 1, **options
        )
        more_before = len(found) > limit
        rows = list(reversed(found[:limit]))
        more_after = bool(rows)  # at least the row the cursor names (unless erased since)
        if not more_before:  # back at the start: the first page, full
            before, rows = None, []
    if before is None:
        found = store.conversations(
            descending=descending, after=after, offset=offset, limit=limit + 1, **options
        )
        more_after = len(found) > limit
        rows = found[:limit]
        more_before = after is not None or offset > 0
        position = None if after is not None else offset
    total = store.conversation_count_estimate(search=search, exact_up_to=EXACT_COUNT_UP_TO)
    return {
        "total": total.count,
        "total_exact": total.exact,
        "total_text": f"{total.count:,}" if total.exact else f"about {_rounded(total.count):,}",
        "search": search,
        "sort": sort,
        "order": "desc" if descending else "asc",
        "offset": offset,
        "position": position,
        "limit": limit,
        "next_cursor": rows[-1].cursor(order, descending) if rows and more_after else None,
        "prev_cursor": rows[0].cursor(order, not descending) if rows and more_before else None,
        "conversations": [
            {
                "conversation_id": s.id,
                "created_at": s.created_at.isoformat(),
                "updated_at": s.updated_at.isoformat(),
                "events": s.version,
                "view_length": s.view_length,
                "unhandled_condensation_request": s.unhandled_condensation_request,
                "title": s.title,
                "agent_server": s.agent_server,
                "execution_status": s.execution_status,
                "llm_model": s.llm_model,
                "first_message": s.first_message,
                "display_title": s.display_title,
            }
            for s in rows
        ],
    }


def when(iso: str) -> str:
    """An ISO 8601 time (the API's) as the pages show it: UTC, to the second, zone named."""
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _rounded(estimate: int) -> int:
    """An estimate to two significant digits (it is not better than that)."""
    digits = max(len(str(estimate)) - 2, 0)
    return round(estimate, -digits) if digits else estimate


def condensation_data(store: EventStore, key: str, seq: int) -> dict[str, Any]:
    """What the condensation at ``seq`` forgot, grouped into runs of the view it cut, its
    summary and where that went, and the view before and after as a diff."""
    version = store.version(key)
    record = store.condensation(key, seq) if 0 < seq <= version else None
    if record is None:
        raise NotFound(f"{key} has no condensation at seq {seq}")
    before = _view(store, key, seq - 1, version)
    after = _view(store, key, seq, version)
    position = {event_id: i for i, event_id in enumerate(before.event_ids)}
    ranges: list[dict[str, Any]] = []
    elsewhere = []
    for i in sorted(position[eid] for eid, _ in record.forgotten if eid in position):
        if ranges and ranges[-1]["end"] == i - 1:
            ranges[-1]["end"] = i
            ranges[-1]["event_ids"].append(before.event_ids[i])
        else:
            ranges.append({"start": i, "end": i, "event_ids": [before.event_ids[i]]})
    elsewhere = sorted(eid for eid, _ in record.forgotten if eid not in position)
    old = set(before.event_ids)
    inserted = [i for i, eid in enumerate(after.event_ids) if eid not in old]
    return {
        "conversation_id": key,
        "version": version,
        "seq": seq,
        "event_id": record.event_id,
        "summary": record.summary,
        "summary_offset": record.summary_offset,
        "summary_position": inserted[0] if inserted else None,
        "forgotten_ranges": ranges,
        "forgotten_not_in_view": elsewhere,
        "forgotten_count": len(record.forgotten),
        "view_before": len(before.event_ids),
        "view_after": len(after.event_ids),
        "diff": sequence_diff(before, after),
    }


def audit_data(store: EventStore, key: str) -> dict[str, Any]:
    """The live view against the resume view, and verify()'s findings."""
    live = store.view(key)
    resume = store.resume_view(key)
    report = store.verify(key).conversations[0]
    return {
        "conversation_id": key,
        "version": live.version,
        "same_events": live.event_ids == resume.event_ids,
        "same_indices": live.manipulation_indices == resume.manipulation_indices,
        "same_request_flag": (
            live.unhandled_condensation_request == resume.unhandled_condensation_request
        ),
        "live": {
            "length": len(live.event_ids),
            "manipulation_indices": live.manipulation_indices,
            "unhandled_condensation_request": live.unhandled_condensation_request,
        },
        "resume": {
            "length": len(resume.event_ids),
            "manipulation_indices": resume.manipulation_indices,
            "unhandled_condensation_request": resume.unhandled_condensation_request,
        },
        "diff": sequence_diff(live, resume),
        "verify": {"ok": report.ok, "problems": report.problems, "notes": report.notes},
    }


def event_data(store: EventStore, key: str, event_id: str) -> dict[str, Any]:
    event = store.event(key, event_id)
    if event is None:
        raise NotFound(f"{key} has no event {event_id!r}")
    live = store.view(key)
    forgotten_by = store.forgotten_by(key, [event_id]).get(event_id)
    row = event_row(0, event.event_id, event.payload_json)
    del row["position"]
    return {
        "conversation_id": key,
        "seq": event.seq,
        **row,
        "recorded_at": event.recorded_at.isoformat(),
        "hash": event.hash,
        "in_live_view": event_id in set(live.event_ids),
        "forgotten_by": forgotten_by,
        "payload": json.dumps(parse(event.payload_json), indent=2, ensure_ascii=False),
    }
