"""Names a package imports on first use (PEP 562): the store's face and ``viewstore`` itself
list what they offer without importing it, so that a command reading the store never pays
for the append machinery (pydantic, the projector, the view engine) it does not run."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, where: Mapping[str, str], renamed: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: each name of ``where`` comes from
    the module it maps to (under its ``renamed`` name there), imported on first use and then
    kept as a plain attribute."""
    namespace = sys.modules[package].__dict__
    sources = dict(renamed or {})

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), sources.get(name, name))
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
