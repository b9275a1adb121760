"""The limits of the store's listings and the codecs of their cursors, in one place.

Two listings page with a cursor: the catalogue of conversations (``store.conversations()``,
``conversation_page()``) and the change feed (``store.feed()``, ``follow()``). A cursor is an
opaque string that names its kind by a prefix, so one of the other kind (or an offset) is
refused as such, and that decodes to the position after which the next page starts; nothing
else of the store reads or writes one.

* **Catalogue** (``c1.``): URL-safe base64 of ``[order, descending, value, id]`` as JSON, the
  last row's keyset position in that order (``viewstore.store.read.catalogue``).
* **Feed** (``f1.``): the writing transaction's id and the position, 16 hex digits each
  (``f1.0000000000000000000000000000000a``). It reads as no number (the position ``9`` and
  then ``10`` once printed as ``0.9`` and ``0.10``, which look like decimals going
  backwards), and being of one width, cursors sort as text in feed order. The older form
  ``"<txid>.<position>"`` is still accepted as ``after``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from viewstore.domain.errors import InvalidArgumentError
from viewstore.store.inputs import MAX_CONVERSATION_ID_LENGTH

#: The most rows one catalogue page or one feed read returns.
MAX_LIMIT = 100_000
MAX_FEED_LIMIT = 100_000
#: The longest cursor text accepted (a catalogue cursor of the longest id fits).
MAX_CURSOR = 2048
#: Up to this many matching rows (by the server's estimate) a count is made exactly; above it
#: the estimate answers (see ``EventStore.conversation_count``).
EXACT_COUNT_LIMIT = 10_000

Order = Literal["id", "created_at", "updated_at", "version", "view_length"]
ORDERS: tuple[Order, ...] = ("id", "created_at", "updated_at", "version", "view_length")

CATALOGUE_PREFIX = "c1."
FEED_PREFIX = "f1."
_HEX_DIGITS = 16  # one 64-bit number
_FEED = re.compile(r"f1\.([0-9a-f]{16})([0-9a-f]{16})")
# The cursors of viewstore 0.1.0 and before: still accepted, never handed out.
_OLD_FEED = re.compile(r"([0-9]{1,19})\.([0-9]{1,19})")
_BIGINT_MAX = 2**63 - 1


def check_order(order_by: object) -> Order:
    if order_by not in ORDERS:
        raise InvalidArgumentError(f"order_by must be one of {', '.join(ORDERS)}, got {order_by!r}")
    return order_by


# -- the catalogue ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cursor:
    """A catalogue cursor, decoded."""

    order_by: Order
    descending: bool
    value: Any  # an aware datetime, an int, or None for the order by id
    id: str


def catalogue_cursor(order_by: Order, descending: bool, value: object, key: str) -> str:
    """The cursor of the row ``key`` whose ``order_by`` column holds ``value``."""
    check_order(order_by)
    position: int | str | None
    if order_by == "id":
        position = None
    elif isinstance(value, datetime):
        position = value.astimezone(UTC).isoformat()
    else:
        position = int(value)  # type: ignore[call-overload]  # version, view_length
    text = json.dumps([order_by, bool(descending), position, key], separators=(",", ":"))
    return CATALOGUE_PREFIX + base64.urlsafe_b64encode(text.encode("utf-8")).decode().rstrip("=")


def parse_cursor(cursor: object, order_by: str, descending: bool) -> Cursor:
    """The cursor ``after`` names, for a listing in ``order_by`` (``descending``);
    ``InvalidArgumentError`` saying why if it is not one."""
    if isinstance(cursor, str) and len(cursor) > MAX_CURSOR:
        raise InvalidArgumentError(
            f"after must be a cursor returned by the catalogue, got {len(cursor)} characters"
        )
    bad = f"after must be a cursor returned by the catalogue, got {cursor!r}"
    if not isinstance(cursor, str) or not cursor.startswith(CATALOGUE_PREFIX):
        raise InvalidArgumentError(bad)
    body = cursor[len(CATALOGUE_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        found = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError) as error:
        raise InvalidArgumentError(f"{bad} (it does not decode)") from error
    if not (
        isinstance(found, list)
        and len(found) == 4
        and found[0] in ORDERS
        and isinstance(found[1], bool)
        and isinstance(found[3], str)
    ):
        raise InvalidArgumentError(f"{bad} (not a catalogue position)")
    order, desc, value, key = found
    if order != order_by or desc != bool(descending):
        raise InvalidArgumentError(
            f"after is a cursor of the order by {order}{' descending' if desc else ''}, "
            f"not of the order by {order_by}{' descending' if descending else ''} asked for"
        )
    try:
        value = _position_value(order, value)
    except (ValueError, OverflowError) as error:
        raise InvalidArgumentError(f"{bad} (its {order} is not one: {error})") from error
    if not _storable_id(key):
        raise InvalidArgumentError(f"{bad} (its id is no conversation id)")
    return Cursor(order_by=order, descending=desc, value=value, id=key)


def _position_value(order: str, value: object) -> Any:
    """A cursor's value for ``order``, as the query compares it; ``ValueError`` if none."""
    if order == "id":
        if value is not None:
            raise ValueError("no value")
        return None
    if order in ("created_at", "updated_at"):
        if not isinstance(value, str):
            raise ValueError("not a time")
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            raise ValueError("no offset")
        moment.astimezone(UTC)  # compared in UTC, which has no year 1 at +14:00 (OverflowError)
        return moment
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("not an integer")
    if not -(2**63) <= value < 2**63:  # a column is a 64-bit integer on every backend
        raise ValueError("out of a 64-bit integer's range")
    return value


def _storable_id(key: str) -> bool:
    """Whether a conversation could have ``key`` as its id: a cursor is decoded from the
    client's text, and PostgreSQL refuses a NUL and the driver a lone surrogate."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in key and len(key) <= MAX_CONVERSATION_ID_LENGTH


def check_limit(limit: object) -> int:
    """A catalogue page's ``limit``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    return limit


# -- the feed -----------------------------------------------------------------------------------


def feed_cursor(txid: int, position: int) -> str:
    return f"{FEED_PREFIX}{txid:0{_HEX_DIGITS}x}{position:0{_HEX_DIGITS}x}"


def decode_feed_cursor(cursor: str) -> tuple[int, int]:
    """The ``(txid, position)`` a cursor stands for; ``InvalidArgumentError`` when malformed."""
    if not isinstance(cursor, str):
        raise InvalidArgumentError(
            f"feed cursor must be a string from FeedEntry.cursor, got {type(cursor).__name__}"
        )
    match = _FEED.fullmatch(cursor)
    base = 16
    if match is None:
        match = _OLD_FEED.fullmatch(cursor)
        base = 10
    if match is None:
        raise InvalidArgumentError(f"malformed feed cursor {cursor[:80]!r}")
    txid, position = int(match.group(1), base), int(match.group(2), base)
    if txid > _BIGINT_MAX or position > _BIGINT_MAX:
        raise InvalidArgumentError(f"feed cursor {cursor!r} is out of range")
    return txid, position


def check_feed_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_FEED_LIMIT:
        raise InvalidArgumentError(
            f"feed limit must be an integer between 1 and {MAX_FEED_LIMIT}, got {limit!r}"
        )
    return limit
