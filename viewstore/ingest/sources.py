"""Where the ingest and ``viewstore sync`` find agent servers: a file of named sources.

The file is named by ``VIEWSTORE_INGEST_SOURCES`` (or ``viewstore ingest --sources``), TOML
or JSON by its suffix (``.json``: JSON, anything else: TOML)::

    [sources.sandbox-1]
    url = "http://10.0.0.5:8000"          # the agent server's base URL
    session_api_key_env = "SANDBOX_1_KEY"  # its session API key, read from this variable
    # session_api_key = "..."              # or written here
    # timeout = 10                         # seconds per REST call (DEFAULT_TIMEOUT)

A post names its source with the ``X-Viewstore-Source`` header (put it in the webhook's
``headers``); a post without it is matched by the ``X-Session-API-Key`` the agent server adds
when it has keys. The URL and key used to pull events always come from this file, never from
a posted body.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from viewstore.domain.errors import InvalidArgumentError

SOURCES_ENV = "VIEWSTORE_INGEST_SOURCES"
SOURCE_HEADER = "x-viewstore-source"
SESSION_KEY_HEADER = "x-session-api-key"
#: Seconds one REST call to an agent server may take, its answer read to the end: a slow or
#: hanging server holds only its own posts, and only this long (``timeout`` in the file).
DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 600
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class Source:
    """One agent server: its name (recorded with each conversation), base URL and key."""

    name: str
    url: str
    session_api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT  # seconds for one REST call, its answer read to the end


def check_url(url: str, what: str = "agent server URL") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgumentError(f"{what} must be an http(s) URL, got {url!r}")
    return url.rstrip("/")


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"source name must be 1-100 letters, digits, '.', '_' or '-', got {name!r}"
        )
    return name


@dataclass(frozen=True)
class Sources:
    """The configured sources, by name."""

    by_name: Mapping[str, Source] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None = None) -> Sources:
        """From ``path``, else the file ``VIEWSTORE_INGEST_SOURCES`` names, else none."""
        chosen = path if path is not None else os.environ.get(SOURCES_ENV) or None
        if chosen is None:
            return cls()
        file = Path(chosen)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as error:
            raise InvalidArgumentError(f"{file}: cannot read the sources file: {error}") from error
        try:
            data = json.loads(text) if file.suffix == ".json" else tomllib.loads(text)
        except (ValueError, tomllib.TOMLDecodeError) as error:
            raise InvalidArgumentError(f"{file}: not valid {_format(file)}: {error}") from error
        return cls.parse(data, str(file))

    @classmethod
    def parse(cls, data: Any, where: str = "sources") -> Sources:
        table = data.get("sources") if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise InvalidArgumentError(f"{where}: needs a [sources.NAME] table per agent server")
        found: dict[str, Source] = {}
        for name, entry in table.items():
            check_name(name)
            if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
                raise InvalidArgumentError(f"{where}: source {name!r} needs a url")
            key = entry.get("session_api_key")
            variable = entry.get("session_api_key_env")
            if variable is not None:
                if not isinstance(variable, str) or variable not in os.environ:
                    raise InvalidArgumentError(
                        f"{where}: source {name!r}: environment variable {variable!r} is not set"
                    )
                key = os.environ[variable]
            if key is not None and not isinstance(key, str):
                raise InvalidArgumentError(f"{where}: source {name!r}: key must be a string")
            timeout = entry.get("timeout", DEFAULT_TIMEOUT)
            if (
                isinstance(timeout, bool)
                or not isinstance(timeout, int | float)
                or not (0 < timeout <= MAX_TIMEOUT)
            ):
                raise InvalidArgumentError(
                    f"{where}: source {name!r}: timeout must be 0..{MAX_TIMEOUT} seconds"
                )
            found[name] = Source(name, check_url(entry["url"]), key or None, float(timeout))
        return cls(found)

    def for_request(self, headers: Mapping[str, str]) -> Source | None:
        """The source a post comes from: named by its header, else the one whose session API
        key it carries (compared in constant time), else None. A post that names one source
        and carries another's key is an agent server posting under another's name:
        ``InvalidArgumentError``."""
        named = headers.get(SOURCE_HEADER)
        keyed = self.by_key(headers.get(SESSION_KEY_HEADER))
        if named is None:
            return keyed
        if keyed is not None and keyed.name != named:
            raise InvalidArgumentError(
                f"the post names agent server {named!r} but carries the session key of "
                f"{keyed.name!r}"
            )
        return self.by_name.get(named)

    def by_key(self, key: str | None) -> Source | None:
        """The source whose session API key is ``key``, compared in constant time."""
        if not key:
            return None
        given = key.encode("utf-8", "surrogateescape")
        found = None
        for source in self.by_name.values():
            if source.session_api_key is not None and hmac.compare_digest(
                source.session_api_key.encode(), given
            ):
                found = source
        return found


def _format(file: Path) -> str:
    return "JSON" if file.suffix == ".json" else "TOML"
