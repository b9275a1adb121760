"""The bad-input catalog: one row per kind of bad input, run through the public API (and a
subset through ``viewstore append``) on both backends.

For every error row: the precise error class (all under ViewstoreError), a message naming the
problem (and the kind, event id or field where there is one), nothing written (a dump of every
table before and after), and the store still works (a valid append and verify afterwards).
Positive controls (``error=None``) pin down inputs that look suspicious but are accepted.

To add a case: append a ``Case`` to ``CASES``. ``call(store, conv)`` gets the shared store and
a conversation id of its own; ``setup(store, conv)`` runs before the "before" dump.

Decision: an event id already stored under ANOTHER conversation is allowed. Event ids are unique
per conversation only (docs/schema.md), because OpenHands forks a conversation by copying
its events, ids included; the case "same id in another conversation" is a positive control.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from viewstore import (
    ConcurrencyError,
    ConversationNotFoundError,
    DuplicateEventError,
    Event,
    EventStore,
    InvalidArgumentError,
    InvalidEventError,
    PayloadTooLargeError,
    Role,
    ViewstoreError,
    append_with_retry,
    parse_event,
)

from ._helpers import action, condensation, dump, message

LIMIT = 10_000_000  # max_event_bytes of the store the 50 MB cases go through
FIFTY_MB = 50 * 1024 * 1024
SQL_ID = "'; DROP TABLE events; --"


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[EventStore, str], Any]
    error: type[ViewstoreError] | None  # None: a positive control, the call must succeed
    contains: tuple[str, ...] = ()  # substrings of the error message
    setup: Callable[[EventStore, str], Any] | None = None
    check: Callable[[EventStore, str, Any], None] | None = None  # positive controls


def two_events(store: EventStore, conv: str) -> None:
    store.append(conv, [message(f"{conv}-1"), message(f"{conv}-2")])


def ev(builder: Callable[..., dict[str, Any]], *args: Any, **fields: Any) -> dict[str, Any]:
    """A valid event with some top-level fields overwritten (or removed, with ``None``...)."""
    event = builder(*args)
    for key, value in fields.items():
        if value is _DROP:
            event.pop(key, None)
        else:
            event[key] = value
    return event


_DROP = object()


def append_one(event: Any, **kwargs: Any) -> Callable[[EventStore, str], Any]:
    return lambda store, conv: store.append(conv, event, **kwargs)


def big_event(kind_of_input: str) -> Callable[[EventStore, str], Any]:
    def call(store: EventStore, conv: str) -> Any:
        event = message("big", "x" * FIFTY_MB)
        raw: Any = event if kind_of_input == "dict" else json.dumps(event)
        return EventStore(store.engine, max_event_bytes=LIMIT).append(conv, raw)

    return call


def stored_as_given(eid: str, payload: dict[str, Any]) -> Callable[[EventStore, str, Any], None]:
    def check(store: EventStore, conv: str, result: Any) -> None:
        assert result.appended == [eid]
        (stored,) = [e for e in store.events(conv) if e.event_id == eid]
        assert stored.payload == payload

    return check


def nothing_created(store: EventStore, conv: str, result: Any) -> None:
    assert result.version == 0 and result.appended == []
    assert conv not in store.conversation_ids()
    with pytest.raises(ConversationNotFoundError):
        store.view(conv)


def copied_from_other_conversation(store: EventStore, conv: str, result: Any) -> None:
    assert result.appended == ["shared-id"]
    assert store.events(f"{conv}-src")[0].payload == store.events(conv)[0].payload


def nested_text(eid: str, levels: int) -> str:
    """A PauseEvent whose field ``v`` nests lists so that the whole event is ``levels`` deep."""
    inner = levels - 1
    return f'{{"id": "{eid}", "kind": "PauseEvent", "v": {"[" * inner}{"]" * inner}}}'


def nested_dict(eid: str, levels: int) -> dict[str, Any]:
    value: list[Any] = []
    for _ in range(levels - 2):
        value = [value]
    return {"id": eid, "kind": "PauseEvent", "v": value}


def hand_built(eid: str, payload_json: str, **fields: Any) -> Event:
    """An Event built without parse_event, as a caller may build one."""
    data: dict[str, Any] = {"kind": "PauseEvent", "id": eid, "role": Role.OTHER}
    data.update(fields)
    return Event(payload_json=payload_json, **data)


def retry_with(**kwargs: Any) -> Callable[[EventStore, str], Any]:
    return lambda s, c: append_with_retry(s, c, lambda view: message("r"), **kwargs)


SELF_CONTAINED: dict[str, Any] = {"id": "loop", "kind": "PauseEvent"}
SELF_CONTAINED["v"] = SELF_CONTAINED
UNKNOWN = {"id": "u1", "kind": "EventFromTheFuture", "nested": {"a": [1, 2.5, None]}}
NUL = message("nul", "before\u0000after")
ACTION_NO_TC = ev(action, "a1", tool_call_id=_DROP)

CASES: list[Case] = [
    # -- not an event at all
    Case("not JSON", append_one('{"id": "a", "kind": '), InvalidEventError, ("not valid JSON",)),
    Case("JSON array", append_one("[1, 2]"), InvalidEventError, ("JSON object, got list",)),
    Case("JSON string", append_one('"hello"'), InvalidEventError, ("JSON object, got str",)),
    Case(
        "a number inside a batch",
        lambda s, c: s.append(c, [message("ok"), 42]),
        InvalidEventError,
        ("event #1", "JSON object, got int"),
    ),
    Case("events not iterable", append_one(42), InvalidArgumentError, ("events must be", "int")),
    Case("events None", append_one(None), InvalidArgumentError, ("events must be", "NoneType")),
    Case(
        "invalid UTF-8 bytes",
        append_one(b'{"id": "x\xff", "kind": "PauseEvent"}'),
        InvalidEventError,
        ("not valid UTF-8", "at byte 9"),
    ),
    Case("NaN", append_one('{"id": "n", "kind": "X", "v": NaN}'), InvalidEventError, ("NaN",)),
    Case(
        "Infinity",
        append_one('{"id": "n", "kind": "X", "v": -Infinity}'),
        InvalidEventError,
        ("-Infinity is not valid JSON",),
    ),
    Case(
        "NaN float in a dict",
        append_one({"id": "n", "kind": "X", "v": float("nan")}),
        InvalidEventError,
        ("not JSON-serializable", "id='n'"),
    ),
    Case(
        "a set in a dict",
        append_one({"id": "n", "kind": "X", "v": {1, 2}}),
        InvalidEventError,
        ("not JSON-serializable", "set"),
    ),
    Case(
        "lone surrogate in a dict",
        append_one(message("s", "bad \ud800 text")),
        InvalidEventError,
        ("lone surrogate", "MessageEvent", "id='s'"),
    ),
    Case(
        "lone surrogate via a JSON escape",
        append_one('{"id": "s", "kind": "PauseEvent", "t": "\\ud800"}'),
        InvalidEventError,
        ("lone surrogate", "PauseEvent"),
    ),
    Case(
        "lone surrogate in the id",
        append_one(message("x\udc80")),
        InvalidEventError,
        ("lone surrogate", "MessageEvent"),
    ),
    Case(
        "lone surrogate in the kind",
        append_one({"id": "k", "kind": "Pause\udc80"}),
        InvalidEventError,
        ("lone surrogate", "id='k'", "Pause\\udc80"),
    ),
    Case(
        "lone surrogate in a key",
        append_one({"id": "k", "kind": "PauseEvent", "\ud800": 1}),
        InvalidEventError,
        ("lone surrogate",),
    ),
    # -- nesting and duplicate keys
    Case(
        "JSON text nested 100,000 deep",
        append_one(nested_text("deep", 100_000)),
        InvalidEventError,
        ("nested deeper than 256 levels",),
    ),
    Case(
        "JSON text nested 257 deep",
        append_one(nested_text("deep", 257)),
        InvalidEventError,
        ("nested deeper than 256 levels",),
    ),
    Case(
        "JSON bytes nested 100,000 deep",
        append_one(nested_text("deep", 100_000).encode()),
        InvalidEventError,
        ("nested deeper than 256 levels",),
    ),
    Case(
        "dict nested 100,000 deep",
        append_one(nested_dict("deep", 100_000)),
        InvalidEventError,
        ("PauseEvent", "id='deep'", "nested deeper than 256 levels"),
    ),
    Case(
        "dict nested 257 deep",
        append_one(nested_dict("deep", 257)),
        InvalidEventError,
        ("nested deeper than 256 levels",),
    ),
    Case(
        "dict that contains itself",
        append_one(SELF_CONTAINED),
        InvalidEventError,
        ("nested deeper than 256 levels",),
    ),
    Case(
        "Event object nested 100,000 deep",
        append_one(hand_built("deep", nested_text("deep", 100_000))),
        InvalidEventError,
        ("nested deeper than 256 levels",),
    ),
    Case(
        "Event object whose payload_json is not JSON",
        append_one(hand_built("p", '{"id": "p", "kind": "PauseEvent"')),
        InvalidEventError,
        ("not valid JSON",),
    ),
    Case(
        "Event object whose fields differ from its payload_json",
        append_one(hand_built("p", '{"id": "p", "kind": "PauseEvent"}', kind="MessageEvent")),
        InvalidEventError,
        ("id='p'", "fields kind", "differ from its payload_json"),
    ),
    Case(
        "duplicate key at the top level",
        append_one('{"id": "a", "kind": "PauseEvent", "id": "b"}'),
        InvalidEventError,
        ("key 'id' appears twice",),
    ),
    Case(
        "duplicate key deep inside",
        append_one(
            '{"id": "a", "kind": "MessageEvent", "llm_message": {"role": "user", '
            '"content": [{"type": "text", "text": "x", "text": "y"}]}}'
        ),
        InvalidEventError,
        ("key 'text' appears twice",),
    ),
    Case(
        "duplicate key in an Event object's payload_json",
        append_one(hand_built("p", '{"id": "p", "kind": "PauseEvent", "kind": "PauseEvent"}')),
        InvalidEventError,
        ("key 'kind' appears twice",),
    ),
    # -- the envelope
    Case(
        "missing id", append_one(ev(message, "x", id=_DROP)), InvalidEventError, ("'id'", "missing")
    ),
    Case("missing kind", append_one({"id": "k"}), InvalidEventError, ("'kind'", "id='k'")),
    Case("kind not a string", append_one({"id": "k", "kind": 5}), InvalidEventError, ("'kind'",)),
    Case("empty kind", append_one({"id": "k", "kind": ""}), InvalidEventError, ("'kind'",)),
    Case(
        "id is an int",
        append_one(ev(message, "x", id=7)),
        InvalidEventError,
        ("MessageEvent", "'id'", "must be a string, got int"),
    ),
    Case("empty id", append_one(ev(message, "")), InvalidEventError, ("'id'", "must not be empty")),
    Case(
        "enormous id (10,000 chars)",
        append_one(ev(message, "i" * 10_000)),
        InvalidEventError,
        ("'id'", "10000 characters long", "limit is 512"),
    ),
    Case("id with /", append_one(ev(message, "a/b")), InvalidEventError, ("'id'", "'/'")),
    Case("id with \\", append_one(ev(message, "a\\b")), InvalidEventError, ("'id'", "'\\\\'")),
    Case("id with newline", append_one(ev(message, "a\nb")), InvalidEventError, ("'\\n'",)),
    Case("id with NUL", append_one(ev(message, "a\x00b")), InvalidEventError, ("'\\x00'",)),
    Case("reserved id", append_one(ev(message, "__root__")), InvalidEventError, ("reserved",)),
    # -- known fields of the wrong type
    Case(
        "tool_call_id is a list",
        append_one(action("a1", tool_call_id=["t"])),
        InvalidEventError,
        ("ActionEvent", "id='a1'", "'tool_call_id'", "got list"),
    ),
    Case(
        "action without tool_call_id",
        append_one(ACTION_NO_TC),
        InvalidEventError,
        ("ActionEvent", "'tool_call_id'", "missing"),
    ),
    Case(
        "thinking_blocks is a dict",
        append_one(ev(action, "a1", thinking_blocks={"t": 1})),
        InvalidEventError,
        ("'thinking_blocks'", "must be a list, got dict"),
    ),
    Case(
        "source is an int",
        append_one(ev(message, "m", source=1)),
        InvalidEventError,
        ("'source'", "got int"),
    ),
    Case(
        "timestamp is an int",
        append_one(ev(message, "m", timestamp=1_700_000_000)),
        InvalidEventError,
        ("'timestamp'", "got int"),
    ),
    Case(
        "parent_id is an int",
        append_one(ev(message, "m", parent_id=3)),
        InvalidEventError,
        ("'parent_id'", "got int"),
    ),
    Case(
        "summary_offset is a string",
        append_one(condensation("c1", summary="s", offset="3")),
        InvalidEventError,
        ("Condensation", "id='c1'", "'summary_offset'", "got str"),
    ),
    Case(
        "summary_offset negative",
        append_one(condensation("c1", summary="s", offset=-1)),
        InvalidEventError,
        ("'summary_offset'", "must be >= 0"),
    ),
    Case(
        "summary_offset bool",
        append_one(condensation("c1", summary="s", offset=True)),
        InvalidEventError,
        ("'summary_offset'", "got bool"),
    ),
    Case(
        "summary_offset 2**70",
        append_one(condensation("c1", summary="s", offset=2**70)),
        InvalidEventError,
        ("'summary_offset'", "out of range"),
    ),
    Case(
        "forgotten_event_ids is a string",
        append_one(condensation("c1", forgotten="m1")),
        InvalidEventError,
        ("'forgotten_event_ids'", "must be a list, got str"),
    ),
    Case(
        "forgotten_event_ids is a dict",
        append_one(condensation("c1", forgotten={"m1": True})),
        InvalidEventError,
        ("'forgotten_event_ids'", "got dict"),
    ),
    Case(
        "forgotten_event_ids holds ints",
        append_one(condensation("c1", forgotten=["m1", 2])),
        InvalidEventError,
        ("'forgotten_event_ids'", "strings only, found int"),
    ),
    # -- ids against each other and the store
    Case(
        "duplicate ids inside one batch",
        lambda s, c: s.append(c, [message("d"), message("x"), message("d", "other")]),
        InvalidEventError,
        ("event #2", "id='d'", "appears twice in one batch (first at #0)"),
    ),
    Case(
        "same id, different payload, already stored",
        lambda s, c: s.append(c, message(f"{c}-1", "changed")),
        DuplicateEventError,
        ("already stored with a different payload",),
        setup=two_events,
    ),
    Case(
        "50 MB event (dict) over a 10 MB limit",
        big_event("dict"),
        PayloadTooLargeError,
        ("MessageEvent", "id='big'", f"the limit is {LIMIT}"),
    ),
    Case(
        "50 MB event (JSON text) over a 10 MB limit",
        big_event("text"),
        PayloadTooLargeError,
        (f"the limit is {LIMIT}",),
    ),
    # -- expected versions
    Case(
        "expected_version negative",
        append_one(message("e"), expected_version=-1),
        InvalidArgumentError,
        ("expected_version", "-1"),
    ),
    Case(
        "expected_version bool",
        append_one(message("e"), expected_version=True),
        InvalidArgumentError,
        ("expected_version", "True"),
    ),
    Case(
        "expected_version str",
        append_one(message("e"), expected_version="2"),
        InvalidArgumentError,
        ("expected_version", "'2'"),
    ),
    Case(
        "expected_version too high",
        append_one(message("e"), expected_version=5),
        ConcurrencyError,
        ("at version 2, expected 5",),
        setup=two_events,
    ),
    Case(
        "expected_version too low",
        append_one(message("e"), expected_version=1),
        ConcurrencyError,
        ("at version 2, expected 1",),
        setup=two_events,
    ),
    Case(
        "expected_version 2**63",
        append_one(message("e"), expected_version=2**63),
        InvalidArgumentError,
        ("expected_version", "between 0 and 9223372036854775807", str(2**63)),
        setup=two_events,
    ),
    Case(
        "expected_version on a new conversation",
        append_one(message("e"), expected_version=3),
        ConcurrencyError,
        ("at version 0, expected 3",),
    ),
    # -- conversation ids
    Case(
        "conversation id empty",
        lambda s, c: s.append("", message("e")),
        InvalidArgumentError,
        ("1..255",),
    ),
    Case(
        "conversation id too long",
        lambda s, c: s.append("c" * 256, message("e")),
        InvalidArgumentError,
        ("1..255",),
    ),
    Case(
        "conversation id not a string",
        lambda s, c: s.append(12, message("e")),
        InvalidArgumentError,
        ("must be a string, got int",),
    ),
    Case(
        "conversation id with /",
        lambda s, c: s.append("a/b", message("e")),
        InvalidArgumentError,
        ("'a/b'", "slash"),
    ),
    Case(
        "conversation id a/../../x",
        lambda s, c: s.append("a/../../x", message("e")),
        InvalidArgumentError,
        ("slash",),
    ),
    *[
        Case(
            f"conversation id {key!r}",
            lambda s, c, key=key: s.append(key, message("e")),
            InvalidArgumentError,
            (f"conversation id {key!r}",),
        )
        for key in ("..", ".", "a\x7f")
    ],
    *[
        Case(
            f"conversation id with a lone surrogate ({method})",
            lambda s, c, method=method, args=args: getattr(s, method)(f"{c}\udcff", *args),
            InvalidArgumentError,
            ("not valid Unicode text", "\\udcff"),
        )
        for method, args in (("append", (message("e"),)), ("view", ()), ("events", ()))
    ],
    Case(
        "append_with_retry to conversation ..",
        lambda s, c: append_with_retry(s, "..", lambda view: message("r")),
        InvalidArgumentError,
        ("'..'",),
    ),
    Case("retry attempts 2**63", retry_with(attempts=2**63), InvalidArgumentError, ("attempts",)),
    Case(
        "retry backoff NaN",
        retry_with(backoff=float("nan")),
        InvalidArgumentError,
        ("backoff", "finite"),
    ),
    Case(
        "retry max_backoff a string",
        retry_with(max_backoff="1"),
        InvalidArgumentError,
        ("max_backoff",),
    ),
    Case(
        "max_event_bytes 2**64",
        lambda s, c: EventStore(s.engine, max_event_bytes=2**64).append(c, message("e")),
        InvalidArgumentError,
        ("max_event_bytes",),
    ),
    # -- reads
    *[
        Case(
            f"{method} of a missing conversation",
            lambda s, c, method=method: getattr(s, method)(c),
            ConversationNotFoundError,
            ("not found",),
        )
        for method in ("view", "events", "resume_view", "replay", "verify", "version")
    ],
    Case(
        "as_of too high",
        lambda s, c: s.view(c, as_of=3),
        InvalidArgumentError,
        ("as_of", "0 and 2"),
        setup=two_events,
    ),
    Case(
        "as_of negative",
        lambda s, c: s.replay(c, as_of=-1),
        InvalidArgumentError,
        ("as_of",),
        setup=two_events,
    ),
    Case(
        "as_of a string",
        lambda s, c: s.view(c, as_of="1"),
        InvalidArgumentError,
        ("as_of",),
        setup=two_events,
    ),
    Case(
        "events limit a string",
        lambda s, c: s.events(c, limit="3"),
        InvalidArgumentError,
        ("limit",),
        setup=two_events,
    ),
    Case(
        "events after a string",
        lambda s, c: s.events(c, after="x"),
        InvalidArgumentError,
        ("after",),
        setup=two_events,
    ),
    *[
        Case(
            f"{name} {value}",
            call,
            InvalidArgumentError,
            (name.split()[-1], "9223372036854775807"),
            setup=two_events,
        )
        for value in (2**63, 2**70, -(2**70))
        for name, call in (
            ("events after", lambda s, c, v=value: s.events(c, after=v)),
            ("events limit", lambda s, c, v=value: s.events(c, limit=v)),
            ("view as_of", lambda s, c, v=value: s.view(c, as_of=v)),
            ("replay as_of", lambda s, c, v=value: s.replay(c, as_of=v)),
        )
    ],
    Case(
        "feed limit 2**70",
        lambda s, c: s.feed(limit=2**70),
        InvalidArgumentError,
        ("feed limit",),
    ),
    Case(
        "feed cursor garbage",
        lambda s, c: s.feed(after="x; DROP"),
        InvalidArgumentError,
        ("cursor",),
    ),
    # -- positive controls
    Case(
        "unknown kind is stored opaque",
        append_one(UNKNOWN),
        None,
        check=lambda s, c, r: (
            stored_as_given("u1", UNKNOWN)(s, c, r),
            _assert(s.view(c).event_ids == []),
        ),
    ),
    Case(
        "SQL characters in an id round-trip",
        append_one(message(SQL_ID)),
        None,
        check=stored_as_given(SQL_ID, message(SQL_ID)),
    ),
    Case(
        "NUL inside a payload string round-trips",
        append_one(NUL),
        None,
        check=stored_as_given("nul", NUL),
    ),
    Case("an empty batch to a new conversation", append_one([]), None, check=nothing_created),
    Case(
        "JSON nested exactly 256 deep is stored",
        append_one(nested_text("deep256", 256)),
        None,
        check=stored_as_given("deep256", json.loads(nested_text("deep256", 256))),
    ),
    Case(
        "dict nested exactly 256 deep is stored",
        append_one(nested_dict("deep256", 256)),
        None,
        check=stored_as_given("deep256", nested_dict("deep256", 256)),
    ),
    Case(
        "after and limit 2**63 - 1 are in range",
        lambda s, c: (s.events(c, after=2**63 - 1), s.events(c, limit=2**63 - 1)),
        None,
        setup=two_events,
        check=lambda s, c, r: _assert(r[0] == [] and [e.seq for e in r[1]] == [1, 2]),
    ),
    Case(
        "an Event object from parse_event is stored",
        append_one(parse_event(json.dumps(message("parsed")))),
        None,
        check=stored_as_given("parsed", message("parsed")),
    ),
    Case(
        "same id in another conversation (forks copy events)",
        lambda s, c: s.append(c, message("shared-id")),
        None,
        setup=lambda s, c: s.append(f"{c}-src", message("shared-id")),
        check=copied_from_other_conversation,
    ),
]


def _assert(condition: bool) -> None:
    assert condition


def test_catalog_is_big_enough() -> None:
    errors = [case for case in CASES if case.error is not None]
    assert len(errors) >= 30
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[case.name for case in CASES])
def test_bad_input(module_store: EventStore, index: int) -> None:
    case = CASES[index]
    store = module_store
    conv = f"case-{index}"
    if case.setup is not None:
        case.setup(store, conv)
    before = dump(store.engine)
    if case.error is None:
        result = case.call(store, conv)
        assert case.check is not None
        case.check(store, conv, result)
    else:
        with pytest.raises(ViewstoreError) as caught:
            case.call(store, conv)
        error = caught.value
        assert type(error) is case.error, f"{type(error).__name__}: {error}"
        message_ = str(error)
        for part in case.contains:
            assert part in message_, f"{part!r} not in {message_!r}"
        assert dump(store.engine) == before, "something was written"
    # the store keeps working
    after = store.append(conv, message(f"{conv}-after"))
    assert after.appended == [f"{conv}-after"]
    assert store.verify(conv).ok


# -- the same through the CLI -----------------------------------------------------------------

CLI_CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("not JSON", '{"id": "a", "kind": \n', ("line 1", "not valid JSON")),
    ("not an object", "[1, 2]\n", ("line 1", "JSON object")),
    ("id is an int", json.dumps(ev(message, "x", id=7)) + "\n", ("line 1", "'id'")),
    (
        "bad field on line 2",
        json.dumps(message("ok")) + "\n" + json.dumps(action("a1", tool_call_id=["t"])) + "\n",
        ("line 2", "tool_call_id"),
    ),
    ("id with /", json.dumps(message("a/b")) + "\n", ("line 1", "'/'")),
    ("NaN", '{"id": "n", "kind": "X", "v": NaN}\n', ("line 1", "NaN")),
    (
        "duplicate ids in the file",
        json.dumps(message("d")) + "\n" + json.dumps(message("d", "x")) + "\n",
        ("line 2", "appears twice"),
    ),
    (
        "summary_offset negative",
        json.dumps(condensation("c1", summary="s", offset=-1)) + "\n",
        ("summary_offset", ">= 0"),
    ),
    (
        "duplicate key",
        '{"id": "a", "kind": "PauseEvent", "kind": "X"}\n',
        ("line 1", "key 'kind' appears twice"),
    ),
    ("nested 100,000 deep", nested_text("deep", 100_000) + "\n", ("line 1", "deeper than 256")),
]


def _cli() -> Any:
    try:
        from viewstore.cli import cli  # noqa: PLC0415
    except ImportError as error:  # pragma: no cover - the CLI lands separately
        pytest.skip(f"viewstore.cli is not available: {error}")
    return cli


def _url(store: EventStore) -> str:
    return store.engine.url.render_as_string(hide_password=False)


@pytest.mark.parametrize("index", range(len(CLI_CASES)), ids=[c[0] for c in CLI_CASES])
def test_bad_input_through_cli(module_store: EventStore, index: int, tmp_path: Path) -> None:
    cli = _cli()
    name, content, parts = CLI_CASES[index]
    conv = f"cli-{index}"
    path = tmp_path / "events.jsonl"
    path.write_text(content, encoding="utf-8")
    before = dump(module_store.engine)
    result = CliRunner().invoke(cli, ["--url", _url(module_store), "append", conv, str(path)])
    assert result.exit_code == 2, (name, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    for part in parts:
        assert part in lines[0], (part, lines[0])
    assert dump(module_store.engine) == before


def test_cli_process_exits_2_without_traceback(module_store: EventStore, tmp_path: Path) -> None:
    _cli()
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"id": "x\xff", "kind": "PauseEvent"}\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from viewstore.cli import main; main()",
            *("--url", _url(module_store), "append", "cli-proc", str(path)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "UTF-8" in proc.stderr


def _viewstore(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The installed ``viewstore`` command, run with raw (bytes) arguments."""
    command = Path(sys.executable).with_name("viewstore")
    return subprocess.run([command, *args], capture_output=True, timeout=120, check=False, cwd=cwd)


def _one_line_exit_2(proc: subprocess.CompletedProcess[bytes], *parts: str) -> None:
    stderr = proc.stderr.decode("utf-8")  # must be printable as UTF-8 too
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for part in parts:
        assert part in lines[0], (part, lines[0])


def test_real_command_with_non_utf8_arguments_and_folder_names(
    module_store: EventStore, tmp_path: Path
) -> None:
    """argv and folder names are bytes on POSIX; invalid UTF-8 reaches Python as lone
    surrogates, which neither the database nor a UTF-8 terminal can take."""
    url = _url(module_store)
    module_store.append("utf8-demo", [message("u1"), message("u2")])
    events = tmp_path / "e.jsonl"
    events.write_text(json.dumps(message("n1")) + "\n", encoding="utf-8")
    before = dump(module_store.engine)
    bad_id = b"conv\xff\xfe"
    for args in (("view", bad_id), ("events", bad_id), ("append", bad_id, str(events))):
        _one_line_exit_2(_viewstore("--url", url, *args, cwd=tmp_path), "not valid Unicode text")
    _one_line_exit_2(
        _viewstore("--url", url, "append", "utf8-demo", b"no-such-file\xff", cwd=tmp_path),
        "No such file",
    )
    _one_line_exit_2(
        _viewstore("--url", url, "import", b"no-such-folder\xff", cwd=tmp_path), "not a folder"
    )
    _one_line_exit_2(
        _viewstore("--url", url, "events", "utf8-demo", "--after", str(2**70), cwd=tmp_path),
        "after must be an integer between 0 and 9223372036854775807",
    )
    # A parent folder holding a conversation folder whose name is not UTF-8.
    parent = tmp_path / "parent"
    (Path(os.fsdecode(bytes(parent) + b"/c\xff")) / "events").mkdir(parents=True)
    child_events = Path(os.fsdecode(bytes(parent) + b"/c\xff/events"))
    (child_events / "event-00000-n1.json").write_text(json.dumps(message("n1")), "utf-8")
    proc = _viewstore("--url", url, "import", bytes(parent), cwd=tmp_path)
    _one_line_exit_2(proc, "not valid Unicode text", "c\\udcff")
    assert "Traceback" not in proc.stdout.decode("utf-8")
    assert dump(module_store.engine) == before

    # A path that is not UTF-8 is still a path: export writes there.
    out = os.fsencode(tmp_path) + b"/out\xff"
    proc = _viewstore("--url", url, "export", "utf8-demo", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr.decode("utf-8")
    assert sorted(os.listdir(out + b"/utf8-demo/events"))[:2] == [
        b".eventlog-len-2.marker",
        b".eventlog.lock",
    ]
