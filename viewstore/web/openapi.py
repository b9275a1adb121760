"""The OpenAPI 3.0 description of /api/, written by hand next to the data it describes
(``model`` and ``details``); tests/web check every answer against it."""

from __future__ import annotations

from functools import cache
from typing import Any

from viewstore.web.details import SORTS


def _obj(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **optional},
    }


STR: dict[str, Any] = {"type": "string"}
INT: dict[str, Any] = {"type": "integer", "minimum": 0}
BOOL: dict[str, Any] = {"type": "boolean"}
NSTR: dict[str, Any] = {"type": "string", "nullable": True}
NINT: dict[str, Any] = {"type": "integer", "nullable": True}
STRS: dict[str, Any] = {"type": "array", "items": STR}
INTS: dict[str, Any] = {"type": "array", "items": INT}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _components() -> dict[str, Any]:
    row = _obj(
        {
            "position": INT,
            "event_id": STR,
            "kind": STR,
            "source": NSTR,
            "timestamp": NSTR,
            "blocks": {
                "type": "array",
                "items": _obj({"label": STR, "text": STR, "mono": BOOL}),
            },
        }
    )
    diff_row = {
        "type": "object",
        "required": ["op"],
        "properties": {
            "op": {"type": "string", "enum": ["same", "removed", "added", "folded"]},
            "count": INT,
            **row["properties"],
        },
    }
    view_summary = _obj(
        {"length": INT, "manipulation_indices": INTS, "unhandled_condensation_request": BOOL}
    )
    return {
        "Error": _obj({"error": STR, "status": INT}),
        "ViewEvent": row,
        "DiffRow": diff_row,
        "ConversationPage": _obj(
            {
                "total": INT,
                "total_exact": BOOL,
                "total_text": STR,
                "search": STR,
                "sort": {"type": "string", "enum": list(SORTS)},
                "order": {"type": "string", "enum": ["asc", "desc"]},
                "offset": INT,
                "position": NINT,
                "limit": INT,
                "next_cursor": NSTR,
                "prev_cursor": NSTR,
                "conversations": {
                    "type": "array",
                    "items": _obj(
                        {
                            "conversation_id": STR,
                            "created_at": {"type": "string", "format": "date-time"},
                            "updated_at": {"type": "string", "format": "date-time"},
                            "events": INT,
                            "view_length": INT,
                            "unhandled_condensation_request": BOOL,
                            "title": NSTR,
                            "agent_server": NSTR,
                            "execution_status": NSTR,
                            "llm_model": NSTR,
                            "first_message": NSTR,
                            "display_title": NSTR,
                        }
                    ),
                },
            }
        ),
        "View": _obj(
            {
                "conversation_id": STR,
                "version": INT,
                "seq": INT,
                "length": INT,
                "first": INT,
                "events": {"type": "array", "items": _ref("ViewEvent")},
                "manipulation_indices": INTS,
                "unhandled_condensation_request": BOOL,
            }
        ),
        "Log": _obj(
            {
                "conversation_id": STR,
                "version": INT,
                "seq": INT,
                "after": INT,
                "limit": INT,
                "events": {
                    "type": "array",
                    "items": _obj(
                        {
                            "seq": INT,
                            "event_id": STR,
                            "kind": STR,
                            "source": NSTR,
                            "timestamp": NSTR,
                            "state": {
                                "type": "string",
                                "enum": ["in_view", "forgotten", "not_in_view", "later"],
                            },
                            "forgotten_by": NINT,
                            "is_condensation": BOOL,
                        }
                    ),
                },
            }
        ),
        "Diff": _obj(
            {
                "conversation_id": STR,
                "version": INT,
                "from": INT,
                "to": INT,
                "removed": STRS,
                "added": {"type": "array", "items": _ref("ViewEvent")},
                "order": STRS,
                "manipulation_indices": INTS,
                "unhandled_condensation_request": BOOL,
            }
        ),
        "Condensation": _obj(
            {
                "conversation_id": STR,
                "version": INT,
                "seq": INT,
                "event_id": STR,
                "summary": NSTR,
                "summary_offset": NINT,
                "summary_position": NINT,
                "forgotten_ranges": {
                    "type": "array",
                    "items": _obj({"start": INT, "end": INT, "event_ids": STRS}),
                },
                "forgotten_not_in_view": STRS,
                "forgotten_count": INT,
                "view_before": INT,
                "view_after": INT,
                "diff": {"type": "array", "items": _ref("DiffRow")},
            }
        ),
        "Audit": _obj(
            {
                "conversation_id": STR,
                "version": INT,
                "same_events": BOOL,
                "same_indices": BOOL,
                "same_request_flag": BOOL,
                "live": view_summary,
                "resume": view_summary,
                "diff": {"type": "array", "items": _ref("DiffRow")},
                "verify": _obj({"ok": BOOL, "problems": STRS, "notes": STRS}),
            }
        ),
        "SearchPage": _obj(
            {
                "hits": {
                    "type": "array",
                    "items": _obj(
                        {
                            "conversation_id": STR,
                            "seq": INT,
                            "event_id": STR,
                            "kind": STR,
                            "source": NSTR,
                            "timestamp": NSTR,
                            "recorded_at": {"type": "string", "format": "date-time"},
                            "rank": {"type": "number"},
                            "snippet": STR,
                            "in_live_view": BOOL,
                        }
                    ),
                },
                "next_cursor": NSTR,
            }
        ),
        "Event": _obj(
            {
                "conversation_id": STR,
                "seq": INT,
                "event_id": STR,
                "kind": STR,
                "source": NSTR,
                "timestamp": NSTR,
                "blocks": row["properties"]["blocks"],
                "recorded_at": STR,
                "hash": STR,
                "in_live_view": BOOL,
                "forgotten_by": NINT,
                "payload": STR,
            }
        ),
    }


def _query(name: str, schema: dict[str, Any], text: str, required: bool = False) -> Any:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "schema": schema,
        "description": text,
    }


CONVERSATION = {"name": "conversation_id", "in": "path", "required": True, "schema": STR}
SEQ = _query("seq", INT, "the view right after this event (default: now)")


def _get(summary: str, result: str, parameters: list[Any]) -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": _ref("Error")}}}
    return {
        "get": {
            "summary": summary,
            "parameters": parameters,
            "responses": {
                "200": {
                    "description": summary,
                    "content": {"application/json": {"schema": _ref(result)}},
                },
                "400": {"description": "malformed parameter", **error},
                "404": {"description": "no such conversation, seq or event", **error},
                "503": {"description": "the database could not answer", **error},
            },
        }
    }


@cache
def schema() -> dict[str, Any]:
    base = "/api/c/{conversation_id}"
    return {
        "openapi": "3.0.3",
        "info": {"title": "viewstore viewer", "version": "1"},
        "paths": {
            "/api/conversations": _get(
                "A page of conversations",
                "ConversationPage",
                [
                    _query("q", STR, "a substring of the conversation id"),
                    _query("sort", {"type": "string", "enum": list(SORTS)}, "sort key"),
                    _query("order", {"type": "string", "enum": ["asc", "desc"]}, "direction"),
                    _query("after", STR, "the next page: a next_cursor"),
                    _query("before", STR, "the previous page: a prev_cursor"),
                    _query("offset", INT, "conversations to skip (a deep offset reads them)"),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "size"),
                ],
            ),
            "/api/search": _get(
                "Events whose text holds every word, best first",
                "SearchPage",
                [
                    _query("q", STR, "the words (letters, digits, _), at most 16", required=True),
                    _query("conversation", STR, "that conversation's events only"),
                    _query("kind", STRS, "event kinds (repeat the parameter)"),
                    _query("source", STRS, "event sources (repeat the parameter)"),
                    _query("window", {"type": "string", "enum": ["live", "forgotten"]}, "where"),
                    _query("after", STR, "the next page: a next_cursor"),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 200}, "size"),
                ],
            ),
            f"{base}/view": _get(
                "The view at a seq (up to 500 of its events, from position first)",
                "View",
                [CONVERSATION, SEQ, _query("first", INT, "position of the first event shown")],
            ),
            f"{base}/log": _get(
                "A page of the log, marked against the view at a seq",
                "Log",
                [
                    CONVERSATION,
                    SEQ,
                    _query("after", INT, "first seq shown is after+1"),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "size"),
                ],
            ),
            f"{base}/diff": _get(
                "The view rows that change between two seqs",
                "Diff",
                [
                    CONVERSATION,
                    _query("from", INT, "seq shown now", required=True),
                    _query("to", INT, "seq to show", required=True),
                ],
            ),
            f"{base}/condensation/{{seq}}": _get(
                "What a condensation forgot and inserted",
                "Condensation",
                [CONVERSATION, {"name": "seq", "in": "path", "required": True, "schema": INT}],
            ),
            f"{base}/audit": _get(
                "Live view against resume view, and verify", "Audit", [CONVERSATION]
            ),
            f"{base}/e/{{event_id}}": _get(
                "One event",
                "Event",
                [CONVERSATION, {"name": "event_id", "in": "path", "required": True, "schema": STR}],
            ),
        },
        "components": {"schemas": _components()},
    }
