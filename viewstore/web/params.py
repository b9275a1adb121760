"""Reading the URL: path and query parameters checked, bad ones raised as ``BadRequest``."""

from __future__ import annotations

from starlette.requests import Request

from viewstore.domain.errors import InvalidArgumentError
from viewstore.domain.events import MAX_ID_LENGTH
from viewstore.store import MAX_CURSOR, conversation_key
from viewstore.web.model import check_text

MAX_SEQ = 2**62
#: Values of one repeated parameter at most: each becomes a bound parameter of a statement.
MAX_VALUES = 50


class BadRequest(ValueError):
    """A malformed parameter: answered with 400 and this message."""


def integer(request: Request, name: str, default: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    return _parse_int(raw, name)


def path_int(request: Request, name: str) -> int:
    return _parse_int(str(request.path_params[name]), name)


def _parse_int(raw: str, name: str) -> int:
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) > MAX_SEQ:
        raise BadRequest(f"{name} must be a non-negative integer, got {raw[:40]!r}")
    return int(text)


def conversation(request: Request) -> str:
    raw = str(request.path_params["conversation_id"])
    try:
        return conversation_key(check_text(raw, "conversation id"))
    except InvalidArgumentError as error:
        raise BadRequest(str(error)) from error


def event_id(request: Request) -> str:
    raw = str(request.path_params["event_id"])
    try:
        return check_text(raw, "event id", limit=MAX_ID_LENGTH)
    except InvalidArgumentError as error:
        raise BadRequest(str(error)) from error


def text(request: Request, name: str, default: str = "", *, limit: int = 400) -> str:
    try:
        return check_text(request.query_params.get(name, default), name, limit=limit)
    except InvalidArgumentError as error:
        raise BadRequest(str(error)) from error


def texts(request: Request, name: str, *, separator: str | None = None) -> list[str]:
    """Every value of a repeated parameter (each split at ``separator``, if given), blanks
    dropped."""
    found = []
    for raw in request.query_params.getlist(name):
        for value in raw.split(separator) if separator else [raw]:
            try:
                checked = check_text(value.strip(), name)
            except InvalidArgumentError as error:
                raise BadRequest(str(error)) from error
            if checked:
                found.append(checked)
    if len(found) > MAX_VALUES:
        raise BadRequest(f"{name} is given at most {MAX_VALUES} times, got {len(found)}")
    return found


def cursor(request: Request, name: str) -> str | None:
    """A keyset cursor of the catalogue (``after``, ``before``), or None; the store says
    whether it is one."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return check_text(raw, name, limit=MAX_CURSOR)
    except InvalidArgumentError as error:
        raise BadRequest(str(error)) from error


def last_event_id(request: Request) -> str | None:
    """The ``Last-Event-ID`` a reconnecting browser sends (a feed cursor), or None."""
    raw = request.headers.get("last-event-id")
    if not raw:
        return None
    try:
        return check_text(raw, "Last-Event-ID", limit=MAX_CURSOR)
    except InvalidArgumentError as error:
        raise BadRequest(str(error)) from error


def choice(request: Request, name: str, options: tuple[str, ...], default: str) -> str:
    value = request.query_params.get(name, default)
    if value not in options:
        raise BadRequest(f"{name} must be one of {', '.join(options)}, got {value[:40]!r}")
    return value
