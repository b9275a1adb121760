"""Masking before storing: secrets found in an event's content are replaced before the event is
hashed and written, so the store never holds them in any form (docs/masking.md).

A rule has a name, a regular expression, and optionally the JSON Pointers (RFC 6901, ``*``
for any one key or index) under which it applies and the kinds of event it applies to. Each
match in a content string becomes ``[masked:NAME]``. What a masking removed is listed per
event as ``Masked`` items (the string's pointer, the rule, the count): the store writes them
beside the event, so an auditor can tell a masked string from one that only looks masked.

The strings the view and the OpenHands SDK's models are built from are never touched: the
same fields a redaction keeps (``viewstore.domain.scrub``). A rule whose path reaches one is
refused when the rules are loaded; an event that masking would still make unparseable is
refused when it is appended. A string holding JSON (a tool call's arguments) stays JSON: a
match that would break it is masked inside the parsed value instead. Pure: no SQL.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viewstore.domain.errors import InvalidArgumentError, InvalidEventError
from viewstore.domain.events import Event, canonical_json, parse_event
from viewstore.domain.scrub import ENVELOPE, KEPT_ANYWHERE, view_envelope

#: Where a rule matched: ``[masked:NAME]``.
MARK_PREFIX = "[masked:"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_ANY = "*"

#: Rules anyone may switch on with ``use = ["common"]``: credentials whose shape is their own
#: (a provider's prefix and length), so a match is nearly always a secret.
COMMON: dict[str, str] = {
    "llm-api-key": r"\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "github-token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "aws-access-key-id": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "slack-token": r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    "private-key": (r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    "bearer-token": r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*",
}
PRESETS = {"common": COMMON}


@dataclass(frozen=True)
class Masked:
    """One string of an event that a rule changed: its JSON Pointer, the rule, how often."""

    path: str
    rule: str
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rule": self.rule, "count": self.count}


@dataclass(frozen=True)
class MaskRule:
    name: str
    pattern: re.Pattern[str]
    paths: tuple[tuple[str, ...], ...] | None = None
    kinds: frozenset[str] | None = None

    @property
    def mark(self) -> str:
        return f"{MARK_PREFIX}{self.name}]"

    def applies_to(self, kind: str) -> bool:
        return self.kinds is None or kind in self.kinds

    def applies_at(self, tokens: Sequence[str]) -> bool:
        if self.paths is None:
            return True
        return any(
            len(path) <= len(tokens)
            and all(p in (_ANY, t) for p, t in zip(path, tokens, strict=False))
            for path in self.paths
        )

    def to_dict(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"name": self.name, "pattern": self.pattern.pattern}
        if self.paths is not None:
            shown["paths"] = ["/" + "/".join(_escape(t) for t in p) for p in self.paths]
        if self.kinds is not None:
            shown["kinds"] = sorted(self.kinds)
        return shown


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _path_tokens(path: object, where: str) -> tuple[str, ...]:
    if not isinstance(path, str) or not path.startswith("/") or path == "/":
        raise InvalidArgumentError(
            f"{where}: a path must be a JSON Pointer into the event, like "
            f"/observation/content/*/text, got {path!r}"
        )
    tokens = tuple(t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/"))
    if tokens[0] in ENVELOPE:
        raise InvalidArgumentError(
            f"{where}: {path} is part of the envelope the view is built from and cannot be masked"
        )
    kept = next((t for t in tokens if t in KEPT_ANYWHERE), None)
    if kept is not None:
        raise InvalidArgumentError(
            f"{where}: {path} reaches {kept!r}, a field the event is parsed by (a type, role or "
            "tool name, an id or an enumerated state), and cannot be masked"
        )
    return tokens


def _rule(table: object, where: str) -> MaskRule:
    if not isinstance(table, Mapping):
        raise InvalidArgumentError(f"{where} must be a table with name and pattern")
    unknown = sorted(set(table) - {"name", "pattern", "paths", "kinds"})
    if unknown:
        raise InvalidArgumentError(f"{where} has no field {unknown[0]!r}")
    name = table.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"{where}.name must be 1-64 lowercase letters, digits, '-' or '_', got {name!r}"
        )
    where = f"rule {name!r}"
    pattern = _pattern(table.get("pattern"), where)
    paths = table.get("paths")
    if paths is not None and (not isinstance(paths, list) or not paths):
        raise InvalidArgumentError(f"{where}: paths must be a non-empty list of JSON Pointers")
    kinds = table.get("kinds")
    if kinds is not None and (
        not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) for k in kinds)
    ):
        raise InvalidArgumentError(f"{where}: kinds must be a non-empty list of event kinds")
    return MaskRule(
        name,
        pattern,
        None if paths is None else tuple(_path_tokens(p, where) for p in paths),
        None if kinds is None else frozenset(kinds),
    )


def _pattern(text: object, where: str) -> re.Pattern[str]:
    if not isinstance(text, str) or not text:
        raise InvalidArgumentError(f"{where}: pattern must be a regular expression")
    try:
        pattern = re.compile(text)
    except re.error as error:
        raise InvalidArgumentError(
            f"{where}: pattern is not a regular expression: {error}"
        ) from None
    if pattern.fullmatch(""):
        raise InvalidArgumentError(f"{where}: pattern matches the empty string")
    return pattern


@dataclass(frozen=True)
class MaskingRules:
    """The rules a store masks appended events by (``EventStore(masking=...)``)."""

    rules: tuple[MaskRule, ...]

    @classmethod
    def from_file(cls, path: str | Path) -> MaskingRules:
        """The rules in a TOML file (docs/masking.md)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InvalidArgumentError(
                f"cannot read the masking rules {str(path)!r}: {error}"
            ) from None
        return cls.from_toml(text, source=str(path))

    @classmethod
    def from_toml(cls, text: str, *, source: str = "masking rules") -> MaskingRules:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise InvalidArgumentError(f"{source} must be TOML: {error}") from None
        return cls.from_mapping(data)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> MaskingRules:
        unknown = sorted(set(data) - {"use", "rules"})
        if unknown:
            raise InvalidArgumentError(
                f"masking rules have no section {unknown[0]!r} (the sections: use, rules)"
            )
        rules: list[MaskRule] = []
        use = data.get("use", [])
        if not isinstance(use, list) or not all(isinstance(u, str) for u in use):
            raise InvalidArgumentError("use must be a list of preset names, like ['common']")
        for preset in use:
            if preset not in PRESETS:
                raise InvalidArgumentError(
                    f"no preset {preset!r} (the presets: {', '.join(sorted(PRESETS))})"
                )
            rules.extend(MaskRule(n, re.compile(p)) for n, p in PRESETS[preset].items())
        tables = data.get("rules", [])
        if not isinstance(tables, list):
            raise InvalidArgumentError("rules must be an array of tables ([[rules]])")
        rules.extend(_rule(table, f"rules[{i}]") for i, table in enumerate(tables))
        names = [rule.name for rule in rules]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InvalidArgumentError(f"two masking rules are named {twice[0]!r}")
        if not rules:
            raise InvalidArgumentError("masking rules name no rule (use = [...] or [[rules]])")
        return cls(tuple(rules))

    def to_dict(self) -> dict[str, Any]:
        return {"rules": [rule.to_dict() for rule in self.rules]}

    def mask(self, event: Event) -> tuple[Event, tuple[Masked, ...]]:
        """``event`` with every match replaced, and what was; the same event when nothing
        matched. ``InvalidEventError`` when the masked event would not be the event it was."""
        rules = [rule for rule in self.rules if rule.applies_to(event.kind)]
        if not rules:
            return event, ()
        found: list[Masked] = []
        obj = json.loads(event.payload_json)
        masked = {
            key: value if key in ENVELOPE else _walk(value, key, (key,), rules, found)
            for key, value in obj.items()
        }
        if not found:
            return event, ()
        try:
            after = parse_event(canonical_json(masked))
        except InvalidEventError as error:
            raise _refused(event, found, f"masked, it would not parse: {error.reason}") from None
        if view_envelope(after) != view_envelope(event):
            raise _refused(event, found, "masking would change what the view is built from")
        return after, tuple(found)

    def mask_batch(
        self, batch: Iterable[Event]
    ) -> tuple[list[Event], dict[str, tuple[Masked, ...]]]:
        """Each event masked, and what was masked, by event id (only the masked ones)."""
        events: list[Event] = []
        records: dict[str, tuple[Masked, ...]] = {}
        for index, event in enumerate(batch):
            try:
                after, found = self.mask(event)
            except InvalidEventError as error:
                raise error.at_index(index) from None
            events.append(after)
            if found:
                records[event.id] = found
        return events, records


def _refused(event: Event, found: list[Masked], why: str) -> InvalidEventError:
    rules = ", ".join(sorted({m.rule for m in found}))
    return InvalidEventError(
        f"{why} (rules {rules}); nothing was stored", kind=event.kind, event_id=event.id
    )


def _pointer(tokens: Sequence[str]) -> str:
    return "/" + "/".join(_escape(t) for t in tokens)


def _walk(
    value: Any, key: str | None, tokens: tuple[str, ...], rules: list[MaskRule], found: list[Masked]
) -> Any:
    if key in KEPT_ANYWHERE:
        return value
    if isinstance(value, str):
        return _mask_string(value, tokens, rules, found)
    if isinstance(value, dict):
        return {k: _walk(v, k, (*tokens, k), rules, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, key, (*tokens, str(i)), rules, found) for i, v in enumerate(value)]
    return value


def _mask_string(
    text: str, tokens: tuple[str, ...], rules: list[MaskRule], found: list[Masked]
) -> str:
    here = [rule for rule in rules if rule.applies_at(tokens)]
    result = text
    counts: list[Masked] = []
    for rule in here:
        result, count = rule.pattern.subn(rule.mark, result)
        if count:
            counts.append(Masked(_pointer(tokens), rule.name, count))
    if not counts:
        return text
    inner = _json_value(text)
    if inner is not None and _json_value(result) is None:
        # A match crossed the JSON's own syntax (``"password": "..."``): mask inside the
        # parsed value instead, so a tool call's arguments still parse where the LLM is sent
        # them again.
        totals: dict[str, int] = {}
        result = json.dumps(_in_json(inner, here, totals), ensure_ascii=False)
        counts = [Masked(_pointer(tokens), rule, count) for rule, count in totals.items()]
    found.extend(counts)
    return result


def _in_json(value: Any, rules: list[MaskRule], totals: dict[str, int]) -> Any:
    """``value`` (parsed from a string) with each match in a string replaced; a member of an
    object whose ``"name": value`` text a rule matches has its whole value replaced."""
    if isinstance(value, str):
        for each in rules:
            value, count = each.pattern.subn(each.mark, value)
            if count:
                totals[each.name] = totals.get(each.name, 0) + count
        return value
    if isinstance(value, list):
        return [_in_json(item, rules, totals) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for name, item in value.items():
        member = json.dumps({name: item}, ensure_ascii=False)[1:-1]
        rule = next((r for r in rules if r.pattern.search(member)), None)
        inside = isinstance(item, str) and rule is not None and rule.pattern.search(item)
        if rule is not None and not inside:
            totals[rule.name] = totals.get(rule.name, 0) + 1
            out[name] = rule.mark
        else:
            out[name] = _in_json(item, rules, totals)
    return out


def _json_value(text: str) -> Any:
    """The object or array ``text`` holds, or None."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


#: Where a store finds its masking rules when it is given none: the path of a TOML file.
MASKING_ENV = "VIEWSTORE_MASKING_RULES"


def resolve_masking(value: MaskingRules | str | Path | None) -> MaskingRules | None:
    """The rules to use: ``value`` (rules, or a file's path), else the file ``MASKING_ENV``
    names, else none."""
    if isinstance(value, MaskingRules):
        return value
    if value is None:
        value = os.environ.get(MASKING_ENV) or None
        if value is None:
            return None
    if not isinstance(value, str | Path):
        raise InvalidArgumentError(
            f"masking must be MaskingRules or the path of a rules file, got {type(value).__name__}"
        )
    return MaskingRules.from_file(value)


def encode(found: Sequence[Masked]) -> str:
    """The record's column: canonical JSON, one object per masked string and rule."""
    return canonical_json([m.to_dict() for m in found])


def decode(column: str) -> tuple[Masked, ...]:
    return tuple(Masked(d["path"], d["rule"], int(d["count"])) for d in json.loads(column))
