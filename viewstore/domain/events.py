"""OpenHands events as viewstore sees them.

An :class:`Event` is a frozen envelope around the exact JSON object OpenHands wrote. It exposes
the handful of fields the view logic reads (docs/semantics.md §2) and keeps the whole object,
as canonical JSON text, so storage and export are lossless. Fields that the view logic does not
read are not validated beyond being JSON: a newer SDK adding fields must not make events
unreadable, and neither must a kind this code has never heard of (it becomes an opaque event that
the view ignores).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from viewstore.domain.errors import InvalidEventError, PayloadTooLargeError
from viewstore.domain.jsontext import (
    DuplicateKeyError,
    JsonTooDeepError,
    check_value_depth,
    loads_strict,
)
from viewstore.domain.kinds import (
    CONVERSATION_ERROR_KIND,
    KIND_ROLES,
    MAX_ID_LENGTH,
    ROOT_ID,
    STATE_UPDATE_KIND,
    SUMMARY_KIND,
    SUMMARY_SUFFIX,
    Role,
    canonical_json,
    id_problem,
)

__all__ = [
    "CONVERSATION_ERROR_KIND",
    "KIND_ROLES",
    "MAX_ID_LENGTH",
    "ROOT_ID",
    "STATE_UPDATE_KIND",
    "SUMMARY_KIND",
    "SUMMARY_SUFFIX",
    "Event",
    "Role",
    "canonical_json",
    "id_problem",
    "parse_event",
    "stored_event",
    "summary_event",
]


class Event(BaseModel):
    """One OpenHands event: the fields the view reads, plus the exact original JSON."""

    model_config = ConfigDict(frozen=True)

    kind: str
    id: str
    role: Role
    known_kind: bool = True
    source: str | None = None
    timestamp: str | None = None
    parent_id: str | None = None
    tool_call_id: str | None = None
    llm_response_id: str | None = None
    thinking: bool = False
    forgotten_event_ids: frozenset[str] = frozenset()
    summary: str | None = None
    summary_offset: int | None = None
    payload_json: str

    @property
    def payload(self) -> dict[str, Any]:
        """A fresh copy of the original JSON object."""
        value: dict[str, Any] = json.loads(self.payload_json)
        return value

    @property
    def is_llm_convertible(self) -> bool:
        return self.role in (Role.ACTION, Role.OBSERVATION, Role.MESSAGE)

    @property
    def is_action(self) -> bool:
        return self.role is Role.ACTION

    @property
    def is_observation(self) -> bool:
        return self.role is Role.OBSERVATION

    @property
    def is_thinking_action(self) -> bool:
        return self.role is Role.ACTION and self.thinking

    @property
    def inserts_summary(self) -> bool:
        """A condensation inserts a summary only when both summary and offset are set."""
        return self.summary is not None and self.summary_offset is not None

    @property
    def summary_id(self) -> str:
        return f"{self.id}{SUMMARY_SUFFIX}"

    @classmethod
    def trusted(cls, **fields: Any) -> Event:
        """Rebuild an event from stored columns that were validated when it was appended.

        Skips validation and pydantic's per-field defaulting: reading a 10,000-event view
        builds 10,000 of these, and ``model_construct`` alone cost more than the query.
        Every field must be given.
        """
        event = cls.__new__(cls)
        object.__setattr__(event, "__dict__", fields)
        object.__setattr__(event, "__pydantic_fields_set__", _ALL_FIELDS)
        object.__setattr__(event, "__pydantic_extra__", None)
        object.__setattr__(event, "__pydantic_private__", None)
        return event

    def same_payload(self, other: Event) -> bool:
        """True when both events carry the same JSON value (forgotten ids compared as a set)."""
        if self.payload_json == other.payload_json:
            return True
        return bool(_comparable(self) == _comparable(other))


_ALL_FIELDS = frozenset(Event.model_fields)


def _comparable(event: Event) -> Any:
    value = event.payload
    if event.role is Role.CONDENSATION and isinstance(value.get("forgotten_event_ids"), list):
        value["forgotten_event_ids"] = sorted(set(value["forgotten_event_ids"]))
    return value


def _load_json(text: str | bytes) -> Any:
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidEventError(f"not valid UTF-8: {e.reason} at byte {e.start}") from e
    try:
        return loads_strict(text)
    except (JsonTooDeepError, DuplicateKeyError) as e:
        raise InvalidEventError(str(e)) from e
    except ValueError as e:
        raise InvalidEventError(f"not valid JSON: {e}") from e


def parse_event(
    obj: Event | BaseModel | dict[str, Any] | str | bytes, *, max_bytes: int | None = None
) -> Event:
    """Turn one OpenHands event (dict, JSON text, bytes, or an SDK event object) into an
    :class:`Event`.

    An SDK event (any other pydantic model) is serialized exactly as the SDK's ``EventLog``
    writes its event files, ``model_dump_json(exclude_none=True)``, so storing the object and
    importing the file give the same JSON value.

    Raises :class:`InvalidEventError` naming the kind, id, field and reason when the value is
    not an event this store can keep; ``max_bytes`` bounds the UTF-8 size of the stored JSON.
    JSON text may not repeat a key within an object, and no event may nest deeper than
    ``viewstore.domain.jsontext.MAX_JSON_DEPTH`` levels (checked without recursing). An ``Event`` is
    returned as it is: the store checks it again (``viewstore.store.inputs``).
    """
    if isinstance(obj, Event):
        if max_bytes is not None:
            _check_size(obj.payload_json, obj.kind, obj.id, max_bytes)
        return obj
    if isinstance(obj, BaseModel):
        obj = obj.model_dump_json(exclude_none=True)
    if isinstance(obj, str | bytes | bytearray):
        if max_bytes is not None and len(obj) > 4 * max_bytes:
            # A cheap early exit: no UTF-8 encoding of the text can shrink below a quarter.
            raise PayloadTooLargeError(f"event is {len(obj)} bytes, the limit is {max_bytes}")
        obj = _load_json(obj)
    elif isinstance(obj, dict):
        try:
            check_value_depth(obj)
        except JsonTooDeepError as e:
            kind, event_id = _hints(obj)
            raise InvalidEventError(str(e), kind=kind, event_id=event_id) from e
    if not isinstance(obj, dict):
        raise InvalidEventError(f"an event must be a JSON object, got {type(obj).__name__}")
    return _build(obj, max_bytes)


def _hints(obj: dict[str, Any]) -> tuple[str | None, str | None]:
    """The kind and id of a raw event, where they are strings, to name it in an error."""
    kind, event_id = obj.get("kind"), obj.get("id")
    return (
        kind if isinstance(kind, str) else None,
        event_id if isinstance(event_id, str) else None,
    )


def _check_size(text: str, kind: str | None, event_id: str | None, max_bytes: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise PayloadTooLargeError(
            f"payload is {size} bytes, the limit is {max_bytes}", kind=kind, event_id=event_id
        )


def _build(obj: dict[str, Any], max_bytes: int | None) -> Event:
    kind = obj.get("kind")
    raw_id = obj.get("id")
    id_hint = raw_id if isinstance(raw_id, str) else None
    if not isinstance(kind, str) or not kind:
        raise InvalidEventError("missing or not a non-empty string", field="kind", event_id=id_hint)
    fields = _Fields(obj, kind, id_hint)
    event_id = fields.event_id()
    role = KIND_ROLES.get(kind, Role.OTHER)
    known = kind in KIND_ROLES
    try:
        text = canonical_json(obj)
    except (TypeError, ValueError) as e:
        raise InvalidEventError(f"not JSON-serializable: {e}", kind=kind, event_id=event_id) from e
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidEventError(
            "contains a lone surrogate, which is not valid UTF-8", kind=kind, event_id=event_id
        ) from e
    if max_bytes is not None:
        _check_size(text, kind, event_id, max_bytes)
    data: dict[str, Any] = {
        "kind": kind,
        "id": event_id,
        "role": role,
        "known_kind": known,
        "source": fields.optional_str("source"),
        "timestamp": fields.optional_str("timestamp"),
        "parent_id": fields.optional_str("parent_id"),
        "payload_json": text,
    }
    if role is Role.ACTION:
        data["tool_call_id"] = fields.required_str("tool_call_id")
        data["llm_response_id"] = fields.required_str("llm_response_id")
        data["thinking"] = bool(fields.optional_list("thinking_blocks"))
    elif role is Role.OBSERVATION:
        data["tool_call_id"] = fields.required_str("tool_call_id")
    elif role is Role.CONDENSATION:
        data["forgotten_event_ids"] = fields.id_set("forgotten_event_ids")
        data["summary"] = fields.optional_str("summary")
        data["summary_offset"] = fields.offset("summary_offset")
    elif kind == SUMMARY_KIND:
        data["summary"] = fields.optional_str("summary")
    return Event.model_validate(data)


_CARRIES_CALL = frozenset({Role.ACTION, Role.OBSERVATION})
# A stored payload was checked when appended (depth, duplicate keys): the plain decoder reads
# it back, without json.loads's argument checks.
_decode = json.JSONDecoder().raw_decode


def stored_event(event_id: str, payload_json: str) -> Event:
    """The Event ``_build`` made of a payload the store validated when it was appended, rebuilt
    from that payload without validating it again (see ``Event.trusted``): the same fields from
    the same places, for an event a view can hold (no condensation: its forgotten ids and
    offset are not read back)."""
    obj, _ = _decode(payload_json)
    kind = obj["kind"]
    role = KIND_ROLES.get(kind, Role.OTHER)
    action = role is Role.ACTION
    return Event.trusted(
        kind=kind,
        id=event_id,
        role=role,
        known_kind=kind in KIND_ROLES,
        source=obj.get("source"),
        timestamp=obj.get("timestamp"),
        parent_id=obj.get("parent_id"),
        tool_call_id=obj["tool_call_id"] if role in _CARRIES_CALL else None,
        llm_response_id=obj["llm_response_id"] if action else None,
        thinking=action and bool(obj.get("thinking_blocks")),
        forgotten_event_ids=frozenset(),
        summary=obj.get("summary") if kind == SUMMARY_KIND else None,
        summary_offset=None,
        payload_json=payload_json,
    )


class _Fields:
    """Typed access to the top-level fields of one raw event, with precise errors."""

    def __init__(self, obj: dict[str, Any], kind: str, event_id: str | None) -> None:
        self.obj = obj
        self.kind = kind
        self.id = event_id

    def fail(self, field: str, reason: str) -> InvalidEventError:
        return InvalidEventError(reason, kind=self.kind, event_id=self.id, field=field)

    def event_id(self) -> str:
        value = self.obj.get("id")
        if value is None:
            raise self.fail("id", "missing")
        if not isinstance(value, str):
            raise self.fail("id", f"must be a string, got {type(value).__name__}")
        _check_id(value, self.fail, "id")
        if value == ROOT_ID:
            raise self.fail("id", f"{ROOT_ID!r} is reserved for the root of the event tree")
        return value

    def required_str(self, field: str) -> str:
        value = self.obj.get(field)
        if value is None:
            raise self.fail(field, "missing")
        if not isinstance(value, str):
            raise self.fail(field, f"must be a string, got {type(value).__name__}")
        return value

    def optional_str(self, field: str) -> str | None:
        value = self.obj.get(field)
        if value is not None and not isinstance(value, str):
            raise self.fail(field, f"must be a string or null, got {type(value).__name__}")
        return value

    def optional_list(self, field: str) -> list[Any]:
        value = self.obj.get(field)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(field, f"must be a list, got {type(value).__name__}")
        return value

    def id_set(self, field: str) -> frozenset[str]:
        ids = self.optional_list(field)
        for item in ids:
            if not isinstance(item, str):
                raise self.fail(field, f"must hold strings only, found {type(item).__name__}")
        return frozenset(ids)

    def offset(self, field: str) -> int | None:
        value = self.obj.get(field)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"must be an integer or null, got {type(value).__name__}")
        if value < 0:
            raise self.fail(field, f"must be >= 0, got {value}")
        if value > 2**62:
            raise self.fail(field, f"is out of range: {value}")
        return value


def _check_id(value: str, fail: Any, field: str) -> None:
    problem = id_problem(value)
    if problem is not None:
        raise fail(field, problem)


def summary_event(condensation: Event) -> Event:
    """The ``CondensationSummaryEvent`` a condensation inserts (never persisted by OpenHands)."""
    payload: dict[str, Any] = {"id": condensation.summary_id}
    if condensation.timestamp is not None:
        payload["timestamp"] = condensation.timestamp
    payload["source"] = condensation.source or "environment"
    payload["summary"] = condensation.summary
    payload["kind"] = SUMMARY_KIND
    return Event(
        kind=SUMMARY_KIND,
        id=condensation.summary_id,
        role=Role.MESSAGE,
        source=payload["source"],
        timestamp=condensation.timestamp,
        summary=condensation.summary,
        payload_json=canonical_json(payload),
    )
