"""The content root as docs/lifecycle.md defines it, computed in the encoder's one walk: equal
to the definition built the plain way (a tree of digests, then its canonical text), with and
without a chain key, with and without the C accelerator; and a redacted payload's root,
rebuilt from the recorded leaf digests, equal to the original's."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from viewstore.domain import chain, leaves
from viewstore.domain.events import canonical_json

from ._json_pointers import at, json_values, put, string_pointers

_KEYS = [None, b"a chain key"]

_values = json_values(text=80, keys=70, leaves=25).filter(
    lambda value: "\ud800" not in json.dumps(value)
)


def _leaf(text: str, key: bytes | None) -> str:
    data = text.encode("utf-8")
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, "sha256").hexdigest()


def _tree(value: Any, key: bytes | None) -> Any:
    if isinstance(value, dict):
        return {_leaf(name, key): _tree(inner, key) for name, inner in value.items()}
    if isinstance(value, list):
        return [_tree(inner, key) for inner in value]
    return _leaf(value, key) if isinstance(value, str) else value


def _defined_root(payload: str, chain_key: bytes | None) -> str:
    """The definition, the slow and obvious way: every string (keys too) by its leaf digest,
    the canonical text of that, its SHA-256."""
    key = chain.leaf_key(chain_key)
    return hashlib.sha256(canonical_json(_tree(json.loads(payload), key)).encode()).hexdigest()


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=10), _values, max_size=5), keyed=st.booleans())
def test_the_root_is_the_defined_one(value: dict[str, Any], keyed: bool) -> None:
    key = _KEYS[keyed]
    payload = canonical_json(value)
    assert chain.content_root(payload, key) == _defined_root(payload, key)


@settings(max_examples=200, deadline=None)
@given(value=st.dictionaries(st.text(max_size=10), _values, max_size=5), data=st.data())
def test_a_redacted_payload_rebuilds_the_original_root(
    value: dict[str, Any], data: st.DataObject
) -> None:
    pointers = string_pointers(value)
    if not pointers:
        return
    key = _KEYS[data.draw(st.booleans())]
    original = canonical_json(value)
    chosen = data.draw(st.lists(st.sampled_from(pointers), min_size=1, unique=True))
    removed = {pointer: at(value, pointer) for pointer in chosen}
    redacted = json.loads(original)
    for pointer in chosen:
        put(redacted, pointer, "[redacted]")
    text = canonical_json(redacted)
    digests = {p: chain.leaf_digest(old, chain.leaf_key(key)) for p, old in removed.items()}
    root = leaves.redacted_root(text, digests, "[redacted]", key)
    assert root == chain.content_root(original, key)
    if any(old != "[redacted]" for old in removed.values()):
        # Taken for its own digest the marker gives another root: the records count.
        assert chain.content_root(text, key) != root


def test_the_marker_counts_as_its_record_even_where_its_own_digest_is_known() -> None:
    # The append's writer keeps the quoted digests of short strings; "[redacted]" may be one
    # of them (an event that said it), and the record's digest must still win.
    seen = canonical_json({"said": "[redacted]", "also": "secret"})
    chain.content_root(seen)
    redacted = canonical_json({"said": "[redacted]", "also": "[redacted]"})
    digest = chain.leaf_digest("secret", None)
    assert leaves.redacted_root(redacted, {"/also": digest}, "[redacted]", None) == (
        chain.content_root(seen)
    )


@pytest.mark.parametrize("chain_key", _KEYS)
def test_without_the_c_accelerator_the_root_is_the_same(
    chain_key: bytes | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = canonical_json(
        {"kind": "MessageEvent", "n": [1, 2.5, -0.0, True, None], "ü": {"k": "v" * 100}}
    )
    accelerated = chain.content_root(payload, chain_key)
    monkeypatch.setattr(chain, "_c_make_encoder", None)
    monkeypatch.setattr(chain, "_writers", {})
    plain = chain.content_root(payload, chain_key)
    assert plain == accelerated == _defined_root(payload, chain_key)
