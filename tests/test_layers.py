"""The package's layers are its folders, and these contracts hold between them
(docs/package-map.md):

- the domain (``viewstore.domain``) imports neither SQLAlchemy nor any other part of viewstore;
- the store (``viewstore.store``) imports the domain and itself, never an adapter;
- the migrations import the store's database helpers and the domain, never the ``EventStore``
  or an adapter.

Every import statement counts, the ones inside functions and under ``TYPE_CHECKING`` too: a
lazy import is still a dependency. The tests read the source; one imports the store's face, in
a process of its own.
"""

from __future__ import annotations

import ast
import subprocess
import sys
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
            # ``from viewstore import store`` imports the module viewstore.store, and
            # ``from sqlalchemy import select`` the name sqlalchemy.select: both are seen
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
    assert {"0027_baseline.py", "online.py"} <= {path.name for path in _files(MIGRATIONS)}
    # The reader sees relative and lazy imports as well as the plain ones at the top.
    imported = {name for _, name in _imports(PACKAGE / "store" / "database" / "round_trip.py")}
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


def _face() -> set[str]:
    """The names ``viewstore/store/__init__.py`` lists in ``__all__``, read from its source."""
    tree = ast.parse((PACKAGE / "store" / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return {str(ast.literal_eval(item)) for item in node.value.elts}  # type: ignore[attr-defined]
    raise AssertionError("viewstore/store/__init__.py has no __all__")


def test_the_face_offers_what_it_lists() -> None:
    """``__all__``, the lazily imported names and the names mypy sees are one list, and each
    resolves (in a fresh process: importing here would not show what a start-up loads)."""
    face = _face()
    tree = ast.parse((PACKAGE / "store" / "__init__.py").read_text(encoding="utf-8"))
    typed = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module != "viewstore.store.lazy"
        for alias in node.names
        if node.module and node.module.startswith("viewstore.store.")
    }
    assert typed == face
    code = (
        "import sys, viewstore.store as s\n"
        "assert set(s.__all__) == set(s._WHERE), set(s.__all__) ^ set(s._WHERE)\n"
        "assert 'viewstore.store.event_store' not in sys.modules\n"
        "[getattr(s, name) for name in s.__all__]\n"
        "assert s.pause.__module__ == 'viewstore.store.pausing', s.pause\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


def test_the_adapters_import_the_store_through_its_face_only() -> None:
    """``from viewstore.store import X`` with X one of the face's names: never a module below
    it, so the store's inside can move without touching an adapter."""
    face = {f"viewstore.store.{name}" for name in _face()}
    assert {"viewstore.store.EventStore", "viewstore.store.StoreStats"} <= face
    found = []
    for path in _files(PACKAGE):
        if path.relative_to(PACKAGE).parts[0] in {"store", "domain"}:
            continue
        # the package's own face shares the store face's lazy loading, and nothing else
        allowed = {"viewstore.store.lazy.lazy_names"} if path == PACKAGE / "__init__.py" else set()
        for line, name in _imports(path):
            if _within(name, "viewstore.store") and name not in {
                "viewstore.store",
                *face,
                *allowed,
            }:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert found == []


#: What builds a statement: an adapter that imports one of these writes SQL of its own.
STATEMENT_BUILDERS = [
    f"sqlalchemy.{name}"
    for name in [
        "select",
        "insert",
        "update",
        "delete",
        "text",
        "func",
        "literal",
        "bindparam",
        "and_",
        "or_",
        "case",
        "cast",
        "Table",
        "Column",
        "MetaData",
        "sql",
        "schema",
        "dialects",
    ]
]


def test_the_adapters_build_no_sql() -> None:
    """The statements are the store's: an adapter may hold an engine or a connection, never
    build a statement (``import sqlalchemy`` whole would hide what it uses: refused too)."""
    found = []
    for adapter in ADAPTERS:
        path = PACKAGE / adapter.removeprefix("viewstore.")
        files = _files(path) if path.is_dir() else [path.with_suffix(".py")]
        for file in files:
            for line, name in _imports(file):
                if name == "sqlalchemy" or any(_within(name, b) for b in STATEMENT_BUILDERS):
                    found.append(f"{file.relative_to(ROOT)}:{line} imports {name}")
    assert found == []


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
        ("from sqlalchemy import select\n", "sqlalchemy.select"),
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


def test_the_runtime_imports_no_migration_tool() -> None:
    """``migrations/online.py`` serves revisions only: no module of the package imports it (the
    store finds its migrations by name, viewstore/store/database/migrate.py)."""
    assert _breaches(PACKAGE, ["viewstore._migrations"]) == []


def test_the_core_asks_the_distribution_seam_only() -> None:
    """``EventStore``, its core and its method groups reach ``store/distribution/`` through
    ``seam.py`` alone (docs/package-map.md)."""
    core = [PACKAGE / "store" / "store_core.py", PACKAGE / "store" / "event_store.py"]
    core += sorted((PACKAGE / "store").glob("*_api.py"))
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in core
        for line, name in _imports(path)
        if _within(name, "viewstore.store.distribution")
        and not _within(name, "viewstore.store.distribution.seam")
    ]
    assert len(core) >= 7
    assert found == []
