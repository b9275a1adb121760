"""The strict JSON of event input: nesting measured without recursion, duplicate keys refused,
and the entry points that parse events (pure View, importer) report both as typed errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from viewstore import InvalidEventError, View, parse_event
from viewstore.domain.errors import ImportFileError
from viewstore.domain.jsontext import (
    MAX_JSON_DEPTH,
    DuplicateKeyError,
    JsonTooDeepError,
    check_text_depth,
    check_value_depth,
    loads_strict,
)
from viewstore.importers.openhands import ConversationFolder, read_events


def depth(value: Any) -> int:
    """The nesting of a small value, the obvious recursive way (the tests' reference)."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=3), children, max_size=3)
    ),
    max_leaves=30,
)


@given(json_values)
def test_the_text_and_value_checks_measure_the_real_depth(value: Any) -> None:
    levels = depth(value)
    text = json.dumps(value)  # strings full of brackets, quotes and backslashes
    for limit in (max(levels - 1, 0), levels, levels + 1):
        for check, argument in ((check_text_depth, text), (check_value_depth, value)):
            if levels > limit:
                with pytest.raises(JsonTooDeepError):
                    check(argument, limit)
            else:
                check(argument, limit)


def test_unterminated_strings_and_lone_backslashes_are_scanned_to_the_end() -> None:
    for tail in ('"' + '\\"' * 1000, '"abc\\', '"' * 3):
        with pytest.raises(JsonTooDeepError):
            check_text_depth("[" * (MAX_JSON_DEPTH + 1) + tail)
        with pytest.raises(ValueError):
            loads_strict("[" * 3 + tail)


def test_loads_strict_refuses_duplicates_and_keeps_key_order() -> None:
    assert list(loads_strict('{"b": 1, "a": {"d": 2, "c": 3}}')) == ["b", "a"]
    with pytest.raises(DuplicateKeyError, match="'c'"):
        loads_strict('{"b": 1, "a": {"c": 2, "c": 3}}')
    with pytest.raises(ValueError, match="NaN"):
        loads_strict('{"a": NaN}')


def deep_text(levels: int) -> str:
    return '{"id": "d", "kind": "PauseEvent", "v": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


def test_pure_entry_points_report_typed_errors() -> None:
    for bad in (deep_text(50_000), '{"id": "d", "kind": "PauseEvent", "id": "e"}'):
        with pytest.raises(InvalidEventError):
            parse_event(bad)
        with pytest.raises(InvalidEventError):
            View().append_event(bad)
        with pytest.raises(InvalidEventError):
            View.from_events([bad])
    assert parse_event(deep_text(MAX_JSON_DEPTH)).id == "d"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (deep_text(50_000), "nested deeper than 256 levels"),
        ('{"id": "d", "kind": "PauseEvent", "kind": "X"}', "key 'kind' appears twice"),
    ],
)
def test_the_importer_names_the_file(tmp_path: Path, content: str, reason: str) -> None:
    events = tmp_path / "c1" / "events"
    events.mkdir(parents=True)
    (events / "event-00000-d.json").write_text(content, encoding="utf-8")
    with pytest.raises(ImportFileError, match=reason) as caught:
        read_events(ConversationFolder("c1", tmp_path / "c1"))
    assert str(caught.value.path).endswith("event-00000-d.json")
