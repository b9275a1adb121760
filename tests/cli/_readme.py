"""The README's fenced code blocks and the markers that say how each one is tested.

Every fenced block in README.md must sit right below a marker line::

    <!-- readme-test: KIND [details] -->

KIND says which test runs it:

- ``skip``            not run here, because another check runs it: the Quick start (it
                      installs the package and runs this suite) and the benchmark command
                      (tests/test_benchmarks.py runs it with ``--quick``)
- ``python``          exec'd in a temp dir by test_readme.py
- ``bash``            run by test_readme.py, all ``bash`` blocks in order, in one temp dir, with
                      ``VIEWSTORE_URL`` on a temp SQLite file and ``.venv/bin`` first on PATH
- ``postgres-bash``   run by test_readme.py on PostgreSQL: the example URL is replaced by a
                      fresh test database's
- ``postgres-reader`` run by test_sql_recipes.py: creates a login in the test database's reader
                      role (``viewstore_reader_viewstore`` in the block is replaced by it)
- ``recipe NAME``     an SQL recipe, run by test_sql_recipes.py on SQLite and PostgreSQL
- ``openhands``       Python needing the OpenHands SDK: run by
                      tests/openhands/test_readme_example.py on SQLite and PostgreSQL
- ``sketch``          Python for a framework the project does not depend on (FastAPI): not
                      run; test_readme.py checks that it parses and calls on ``store`` only
                      methods ``AsyncEventStore`` has
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
KINDS = {
    "skip",
    "python",
    "bash",
    "postgres-bash",
    "postgres-reader",
    "recipe",
    "openhands",
    "sketch",
}
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)
_MARKER = re.compile(r"<!-- readme-test: ([\w-]+)(?: ([^>]*?))? -->\s*$")


@dataclass(frozen=True)
class Block:
    kind: str
    detail: str
    language: str
    code: str
    line: int


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def blocks() -> list[Block]:
    text = readme_text()
    found: list[Block] = []
    for fence in _FENCE.finditer(text):
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        line = text.count("\n", 0, fence.start()) + 1
        marker = _MARKER.search(before)
        assert marker is not None, f"README.md:{line}: code block without a readme-test marker"
        kind = marker.group(1)
        assert kind in KINDS, f"README.md:{line}: unknown readme-test kind {kind!r}"
        found.append(
            Block(kind, (marker.group(2) or "").strip(), fence.group(1), fence.group(2), line)
        )
    return found


def blocks_of(kind: str) -> list[Block]:
    return [block for block in blocks() if block.kind == kind]


def recipes() -> dict[str, str]:
    return {block.detail: block.code for block in blocks_of("recipe")}


def section(title: str) -> str:
    """The text of the ``## title`` section of the README."""
    text = readme_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]
