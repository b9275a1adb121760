"""Masking rules (viewstore/domain/masking.py, docs/masking.md), without a database: what a rules
file may say and the typed error for what it may not, and a property: whatever text surrounds
a secret, the masked event holds no match of any rule, parses as the event it was (the same
envelope, ids and kinds), and masking it again changes nothing."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from viewstore import InvalidArgumentError, MaskingRules, parse_event
from viewstore.domain.masking import COMMON
from viewstore.domain.scrub import view_envelope

from .cli._readme import blocks_of
from .ops._helpers import action, message, observation

COMMON_RULES = MaskingRules.from_toml('use = ["common"]')
SECRETS = [
    "sk-proj-" + "Ab1" * 10,
    "sk-ant-api03-" + "Zz9_" * 8,
    "ghp_" + "a" * 36,
    "github_pat_" + "B" * 30,
    "AKIA" + "ABCDEFGHIJKLMNOP",
    "xoxb-123456789012-abcdef",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----",
    "Bearer eyJhbGciOiJIUzI1NiJ9.payload",
]


@pytest.mark.parametrize(
    ("toml", "message_"),
    [
        ("rules = 3", r"rules must be an array of tables"),
        ("[[rules]]\npattern = 'x'", r"rules\[0\]\.name must be"),
        ("[[rules]]\nname = 'Has Space'\npattern = 'x'", r"name must be"),
        ("[[rules]]\nname = 'a'\npattern = '('", r"rule 'a': pattern is not a regular exp"),
        ("[[rules]]\nname = 'a'\npattern = 'x*'", r"rule 'a': pattern matches the empty"),
        ("[[rules]]\nname = 'a'\npattern = 'x'\npaths = ['/id']", r"/id is part of the envelope"),
        (
            "[[rules]]\nname = 'a'\npattern = 'x'\npaths = ['/action/kind']",
            r"reaches 'kind', a field the event is parsed by",
        ),
        ("[[rules]]\nname = 'a'\npattern = 'x'\npaths = ['no/slash']", r"must be a JSON Pointer"),
        ("[[rules]]\nname = 'a'\npattern = 'x'\nkinds = []", r"kinds must be a non-empty list"),
        ("[[rules]]\nname = 'a'\npattern = 'x'\nwhen = 1", r"rules\[0\] has no field 'when'"),
        ("use = ['rare']", r"no preset 'rare'"),
        ("use = ['common']\n[[rules]]\nname = 'llm-api-key'\npattern = 'x'", r"two masking"),
        ("", r"name no rule"),
        ("mask = 1", r"no section 'mask'"),
        ("use = [", r"must be TOML"),
    ],
)
def test_a_mistake_in_the_rules_is_a_typed_error_naming_it(toml: str, message_: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message_):
        MaskingRules.from_toml(toml)


def test_every_common_rule_finds_its_secret_and_the_rules_print_back() -> None:
    for secret in SECRETS:
        event = parse_event(message("m1", f"before {secret} after"))
        masked, found = COMMON_RULES.mask(event)
        assert secret not in masked.payload_json, secret
        assert len(found) == 1
    shown = COMMON_RULES.to_dict()["rules"]
    assert [rule["name"] for rule in shown] == list(COMMON)
    again = MaskingRules.from_mapping({"rules": shown})
    assert again == COMMON_RULES


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    before=_TEXT,
    after=_TEXT,
    secret=st.sampled_from(SECRETS),
    where=st.sampled_from(["message", "thought", "output", "arguments"]),
)
def test_a_masked_event_holds_no_secret_and_is_still_the_event_it_was(
    before: str, after: str, secret: str, where: str
) -> None:
    body = f"{before} {secret} {after}"
    if where == "message":
        raw = message("m1", body)
    elif where == "output":
        raw = observation("o1")
        raw["observation"]["content"][0]["text"] = body
    else:
        raw = action("a1")
        raw["thought"] = [{"type": "text", "text": body}]
        raw["tool_call"] = {
            "id": "tc1",
            "name": "terminal",
            "arguments": json.dumps({"command": body}),
            "origin": "completion",
        }
    event = parse_event(raw)
    masked, found = COMMON_RULES.mask(event)
    assert found
    text = masked.payload_json
    for rule in COMMON_RULES.rules:
        for value in _strings(json.loads(text)):
            hits = [m for m in rule.pattern.findall(value) if "[masked:" not in m]
            assert not hits or re.fullmatch(r"\[masked:[a-z-]+\]", hits[0]), (rule.name, value)
    assert secret not in text
    assert view_envelope(masked) == view_envelope(event)
    assert COMMON_RULES.mask(masked) == (masked, ())


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        inner = []
        if value.startswith("{"):
            try:
                inner = _strings(json.loads(value))
            except ValueError:
                inner = []
        return [value, *inner]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_rules_files_the_docs_show_load() -> None:
    shown = blocks_of("masking-rules")
    assert shown
    for block in shown:
        rules = MaskingRules.from_toml(block.code)
        assert rules.rules, block.where
