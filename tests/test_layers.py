"""The package's layers are its folders, and these contracts hold between them
(docs/package-map.md):

- the domain (``viewstore.domain``) imports neither SQLAlchemy nor any other part of viewstore;
- the store (``viewstore.store``) imports the domain and itself, never an adapter;
- the migrations import the store's database helpers and the domain, never the ``EventStore``
  or an adapter.

Every import statement counts, the ones inside functions and under ``TYPE_CHECKING`` too: a
lazy import is still a dependency. The test reads the source; it imports nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "viewstore"
MIGRATIONS = ROOT / "migrations"

#: The adapters: everything in the package that is neither the domain nor the store.
ADAPTERS = sorted(
    f"viewstore.{path.stem if path.is_file() else path.name}"
    for path in PACKAGE.iterdir()
    if ((path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py")
    and path.stem not in {"__init__", "domain", "store"}
)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            yield node.lineno, stem
            # ``from viewstore import store`` imports the module viewstore.store
            for alias in node.names:
                yield node.lineno, f"{stem}.{alias.name}"


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _breaches(folder: Path, forbidden: list[str], root: Path = ROOT) -> list[str]:
    found = []
    for path in _files(folder):
        for line, name in _imports(path, root):
            if any(_within(name, prefix) for prefix in forbidden):
                found.append(f"{path.relative_to(root)}:{line} imports {name}")
    return found


def test_the_layers_are_found() -> None:
    """A contract over no files would pass whatever the code did."""
    assert len(_files(PACKAGE / "domain")) >= 10
    assert len(_files(PACKAGE / "store")) >= 40
    assert {"viewstore.aio", "viewstore.cli", "viewstore.openhands", "viewstore.web"} <= set(
        ADAPTERS
    )
    assert len(_files(MIGRATIONS / "versions")) >= 20
    # The reader sees relative and lazy imports as well as the plain ones at the top.
    imported = {name for _, name in _imports(PACKAGE / "store" / "append" / "fast_path.py")}
    assert "viewstore.store.database.aiosqlite_thread.run_on_thread" in imported


def test_the_domain_imports_no_sql_and_nothing_above_it() -> None:
    forbidden = ["sqlalchemy", "alembic", "psycopg", "viewstore.store", *ADAPTERS]
    assert _breaches(PACKAGE / "domain", forbidden) == []


def test_the_domain_is_imported_by_its_folder_name_only() -> None:
    """``viewstore.domain`` is the one way in: no top-level module re-exports a domain
    module under an old name."""
    stray = [
        name
        for name in ("events", "kinds", "projector", "chain", "jsontext", "order_key", "errors")
        if (PACKAGE / f"{name}.py").exists()
    ]
    assert stray == [] and not (PACKAGE / "view").exists()


def test_the_store_imports_no_adapter() -> None:
    assert _breaches(PACKAGE / "store", ADAPTERS) == []


def test_the_migrations_import_no_event_store_and_no_adapter() -> None:
    forbidden = [
        "viewstore.store.event_store",
        "viewstore.store.store_core",
        *ADAPTERS,
    ]
    found = _breaches(MIGRATIONS, forbidden)
    # ``from viewstore.store import EventStore`` names the face, not the module
    for path in _files(MIGRATIONS):
        for line, name in _imports(path):
            if name == "viewstore.store.EventStore":
                found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import sqlalchemy\n", "sqlalchemy"),
        ("def f():\n    from viewstore.cli import app\n", "viewstore.cli.app"),
        ("from ..store import records\n", "viewstore.store.records"),
    ],
)
def test_the_reader_sees_what_would_breach_a_contract(
    tmp_path: Path, source: str, expected: str
) -> None:
    """The contracts can fail: a forbidden import, plain, lazy or relative, is reported."""
    folder = tmp_path / "viewstore" / "domain"
    folder.mkdir(parents=True)
    (folder / "bad.py").write_text(source)
    breaches = _breaches(folder, ["sqlalchemy", "viewstore.store", "viewstore.cli"], tmp_path)
    assert any(expected in breach for breach in breaches), breaches
