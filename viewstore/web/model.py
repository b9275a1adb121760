"""The data every page and API answer is made of, read through EventStore's public reads only.

Each function returns plain JSON-ready dicts: the HTML pages render them and the API returns
them as they are, so the two can never disagree.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store import EventStore, StoredEvent, StoredView
from viewstore.web.content import blocks, parse

LOG_PAGE = 100
#: View rows on one page; a longer view is paged (the step control then reloads the page).
VIEW_PAGE = 500
#: Unchanged rows shown around each change in a diff; longer runs are folded.
CONTEXT = 2


class NotFound(LookupError):
    """The conversation exists but the thing asked for (a seq, an event, a condensation) not."""


def check_text(value: str, what: str, limit: int = 400) -> str:
    """URL text the database could refuse (NUL, a lone surrogate, huge) is bad input, said as
    such."""
    if "\x00" in value or len(value) > limit or not _encodable(value):
        raise InvalidArgumentError(
            f"{what} must be at most {limit} characters of UTF-8 text without NUL"
        )
    return value


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def event_row(position: int, event_id: str, payload_json: str) -> dict[str, Any]:
    payload = parse(payload_json)
    return {
        "position": position,
        "event_id": event_id,
        "kind": str(payload.get("kind", "?")),
        "source": payload.get("source"),
        "timestamp": payload.get("timestamp"),
        "blocks": [{"label": b.label, "text": b.text, "mono": b.mono} for b in blocks(payload)],
    }


def _rows(view: StoredView, only: Iterable[int] | None = None) -> list[dict[str, Any]]:
    ids, payloads = view.event_ids, view.payloads
    wanted = range(len(ids)) if only is None else only
    return [event_row(i, ids[i], payloads[i]) for i in wanted]


def _check_seq(key: str, seq: int, version: int) -> None:
    if not 0 <= seq <= version:
        raise NotFound(f"seq {seq} is out of range: {key} has events 1 to {version} (0: empty)")


def _view(store: EventStore, key: str, seq: int, version: int) -> StoredView:
    _check_seq(key, seq, version)
    # The current view is one index range scan; an as-of read scans the rows' lifetimes.
    return store.view(key, as_of=None if seq == version else seq)


def view_data(
    store: EventStore, key: str, seq: int | None, first: int | None = None
) -> dict[str, Any]:
    """The view at ``seq``: its rows from position ``first`` on, at most ``VIEW_PAGE`` of them
    (by default the last ones: what the LLM read most recently). Only those rows are read."""
    version = store.version(key)
    at = version if seq is None else seq
    _check_seq(key, at, version)
    try:
        page = store.view_page(
            key, as_of=None if at == version else at, first=first, limit=VIEW_PAGE
        )
    except InvalidArgumentError as e:  # a position past the view: a missing thing, not bad input
        raise NotFound(str(e)) from e
    view = page.view
    return {
        "conversation_id": key,
        "version": version,
        "seq": at,
        "length": page.length,
        "first": page.first,
        "events": [
            event_row(page.first + i, event_id, payload)
            for i, (event_id, payload) in enumerate(zip(view.event_ids, view.payloads, strict=True))
        ],
        "manipulation_indices": list(view.manipulation_indices),
        "unhandled_condensation_request": view.unhandled_condensation_request,
    }


def log_data(
    store: EventStore,
    key: str,
    seq: int | None,
    after: int | None,
    *,
    limit: int = LOG_PAGE,
) -> dict[str, Any]:
    """A page of the full log, each event marked against the view at ``seq``."""
    version = store.version(key)
    at = version if seq is None else seq
    _check_seq(key, at, version)
    start = max(0, at - limit) if after is None else after
    if not 0 <= start <= version:
        raise NotFound(f"log offset {start} is out of range: {key} has {version} events")
    page = store.events(key, after=start, limit=limit)
    shown = [e.event_id for e in page if e.seq <= at]
    in_view = store.in_view(key, shown, as_of=None if at == version else at) if shown else set()
    forgotten = store.forgotten_by(key, shown, upto=at)
    return {
        "conversation_id": key,
        "version": version,
        "seq": at,
        "after": start,
        "limit": limit,
        "events": [_log_row(event, at, in_view, forgotten) for event in page],
    }


def _log_row(
    event: StoredEvent,
    at: int,
    in_view: set[str],
    forgotten: dict[str, int],
) -> dict[str, Any]:
    payload = parse(event.payload_json)
    if event.seq > at:
        state = "later"
    elif event.event_id in in_view:
        state = "in_view"
    elif event.event_id in forgotten:
        state = "forgotten"
    else:
        state = "not_in_view"  # never LLM-visible, or dropped by the view's own rules
    return {
        "seq": event.seq,
        "event_id": event.event_id,
        "kind": event.kind,
        "source": payload.get("source"),
        "timestamp": payload.get("timestamp"),
        "state": state,
        "forgotten_by": forgotten.get(event.event_id) if state == "forgotten" else None,
        "is_condensation": event.kind == "Condensation",
    }


def diff_data(store: EventStore, key: str, start: int, end: int) -> dict[str, Any]:
    """What changes in the view from seq ``start`` to seq ``end``: only the rows that differ."""
    version = store.version(key)
    before = _view(store, key, start, version)
    after = _view(store, key, end, version)
    old = set(before.event_ids)
    new_ids = after.event_ids
    new = set(new_ids)
    return {
        "conversation_id": key,
        "version": version,
        "from": start,
        "to": end,
        "removed": [event_id for event_id in before.event_ids if event_id not in new],
        "added": _rows(after, [i for i, event_id in enumerate(new_ids) if event_id not in old]),
        "order": new_ids,
        "manipulation_indices": list(after.manipulation_indices),
        "unhandled_condensation_request": after.unhandled_condensation_request,
    }


def sequence_diff(before: StoredView, after: StoredView) -> list[dict[str, Any]]:
    """The two views as one list of rows, each ``same``, ``removed`` or ``added``; long
    unchanged runs fold into one ``folded`` row that says how many it hides."""
    a_ids, b_ids = before.event_ids, after.event_ids
    out: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(None, a_ids, b_ids, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(_context(before, i1, i2))
            continue
        if op in ("delete", "replace"):
            out.extend({"op": "removed", **row} for row in _rows(before, range(i1, i2)))
        if op in ("insert", "replace"):
            out.extend({"op": "added", **row} for row in _rows(after, range(j1, j2)))
    return out


def _context(view: StoredView, i1: int, i2: int) -> list[dict[str, Any]]:
    if i2 - i1 <= 2 * CONTEXT + 1:
        return [{"op": "same", **row} for row in _rows(view, range(i1, i2))]
    head = [{"op": "same", **row} for row in _rows(view, range(i1, i1 + CONTEXT))]
    tail = [{"op": "same", **row} for row in _rows(view, range(i2 - CONTEXT, i2))]
    return [*head, {"op": "folded", "count": i2 - i1 - 2 * CONTEXT}, *tail]
