"""The package list in pyproject.toml names every package folder (a missing one installs fine
in editable mode and is absent from a regular install: viewstore.cli once was)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = config["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "viewstore").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    mapped = setuptools["package-dir"]
    for name, folder in mapped.items():
        assert (ROOT / folder / "__init__.py").is_file(), name
    assert listed == on_disk | set(mapped)
