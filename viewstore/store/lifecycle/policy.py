"""Retention policies (docs/retention.md): how long until what every view forgot is compacted,
until every event's content is redacted (its metadata kept), and until a conversation no one
appends to is erased; a store-wide default and overrides per conversation, read from a TOML
file::

    [default]
    compact_after = "30d"
    redact_after = "90d"
    delete_idle_after = "180d"

    keep_last_per_source = 1000

    [conversations."c-legal-hold"]
    compact_after = "never"
    redact_after = "never"
    delete_idle_after = "never"

    [sources."sandbox-1"]
    keep_last = 50

A file is configuration kept beside the deployment (reviewed, versioned), not rows a worker
could rewrite: the policy decides what the owner's sweeper deletes, and the writer role must
not be able to shorten it. Pure: no SQL.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from viewstore.domain.errors import InvalidArgumentError

NEVER = "never"
_DURATION = re.compile(r"^\s*(\d{1,6})\s*([dhms])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_RULES = ("compact_after", "redact_after", "delete_idle_after")


def parse_duration(text: object, where: str) -> timedelta | None:
    """``30d``, ``12h``, ``30m``, ``45s`` (``0d``: at once), or ``never`` (None)."""
    if text == NEVER:
        return None
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidArgumentError(
            f"{where} must be a number and a unit d, h, m or s (like 30d), or {NEVER!r}, "
            f"got {text!r}"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def render(period: timedelta | None) -> str:
    """A period as a policy file writes it."""
    if period is None:
        return NEVER
    seconds = int(period.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class Rules:
    """One scope's rules; None: never (or, in an override, what the default says)."""

    compact_after: timedelta | None = None
    redact_after: timedelta | None = None
    delete_idle_after: timedelta | None = None

    def to_dict(self) -> dict[str, str]:
        return {name: render(getattr(self, name)) for name in _RULES}


@dataclass(frozen=True)
class RetentionPolicy:
    """The store-wide default and the overrides by conversation id; how many conversations
    of each agent server (a source, ``viewstore ingest``) to keep, the most recently appended
    to first (None: all)."""

    default: Rules = field(default_factory=Rules)
    conversations: Mapping[str, Rules] = field(default_factory=dict)
    keep_last_per_source: int | None = None
    sources: Mapping[str, int | None] = field(default_factory=dict)

    def keep_last(self, source: str) -> int | None:
        """How many of ``source``'s conversations to keep (None: all)."""
        return self.sources.get(source, self.keep_last_per_source)

    def held(self, conversation_id: str) -> bool:
        """Whether the policy names the conversation and never deletes it (a legal hold)."""
        rules = self.conversations.get(conversation_id)
        return rules is not None and rules.delete_idle_after is None

    def for_conversation(self, conversation_id: str) -> Rules:
        return self.conversations.get(conversation_id, self.default)

    @classmethod
    def from_file(cls, path: str | Path) -> RetentionPolicy:
        """The policy in the TOML file at ``path`` (see this module)."""
        return load(path)

    @classmethod
    def from_toml(cls, text: str) -> RetentionPolicy:
        """The policy a TOML text gives."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise InvalidArgumentError(f"a retention policy must be TOML: {error}") from error
        return from_mapping(data)

    def to_dict(self) -> dict[str, Any]:
        return {
            "default": {
                **self.default.to_dict(),
                "keep_last_per_source": _count_text(self.keep_last_per_source),
            },
            "conversations": {
                key: rules.to_dict() for key, rules in sorted(self.conversations.items())
            },
            "sources": {key: _count_text(n) for key, n in sorted(self.sources.items())},
        }


def _count_text(count: int | None) -> int | str:
    return NEVER if count is None else count


def _count(value: object, where: str) -> int | None:
    """A number of conversations to keep, at least 1, or ``never`` (None: keep all)."""
    if value == NEVER:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(
            f"{where} must be a whole number of at least 1, or {NEVER!r}, got {value!r}"
        )
    return value


def _rules(table: object, where: str, base: Rules | None) -> Rules:
    if not isinstance(table, dict):
        raise InvalidArgumentError(f"{where} must be a table of rules")
    unknown = sorted(set(table) - set(_RULES))
    if unknown:
        raise InvalidArgumentError(
            f"{where} has no rule {unknown[0]!r} (the rules: {', '.join(_RULES)})"
        )
    found: dict[str, timedelta | None] = {}
    for name in _RULES:
        if name in table:
            found[name] = parse_duration(table[name], f"{where}.{name}")
        else:  # an override keeps the default's rule it does not name
            found[name] = None if base is None else getattr(base, name)
    return Rules(**found)


def from_mapping(data: Mapping[str, Any]) -> RetentionPolicy:
    """A policy from a parsed file; ``InvalidArgumentError`` names what is wrong and where."""
    unknown = sorted(set(data) - {"default", "conversations", "sources"})
    if unknown:
        raise InvalidArgumentError(
            f"a retention policy has no section {unknown[0]!r} (the sections: default, "
            "conversations, sources)"
        )
    table = data.get("default", {})
    keep_last = None
    if isinstance(table, dict) and "keep_last_per_source" in table:
        table = dict(table)
        keep_last = _count(table.pop("keep_last_per_source"), "default.keep_last_per_source")
    default = _rules(table, "default", None)
    overrides = data.get("conversations", {})
    if not isinstance(overrides, dict):
        raise InvalidArgumentError("conversations must be a table of tables, one per id")
    conversations = {
        str(key): _rules(value, f"conversations.{key}", default) for key, value in overrides.items()
    }
    return RetentionPolicy(default, conversations, keep_last, _sources(data.get("sources", {})))


def _sources(tables: object) -> dict[str, int | None]:
    if not isinstance(tables, dict):
        raise InvalidArgumentError("sources must be a table of tables, one per source")
    found: dict[str, int | None] = {}
    for name, table in tables.items():
        where = f"sources.{name}"
        if not isinstance(table, dict) or set(table) != {"keep_last"}:
            raise InvalidArgumentError(f"{where} must be a table with keep_last only")
        found[str(name)] = _count(table["keep_last"], f"{where}.keep_last")
    return found


def load(path: str | Path) -> RetentionPolicy:
    """The policy in the TOML file at ``path``."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise InvalidArgumentError(f"cannot read the policy {str(path)!r}: {error}") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise InvalidArgumentError(f"the policy {str(path)!r} is not TOML: {error}") from error
    return from_mapping(data)
