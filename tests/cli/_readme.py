"""The fenced code blocks of README.md, CHANGELOG.md and every page under docs/, and the
markers that say how each one is tested.

Every fenced block must sit right below a marker line::

    <!-- doc-test: KIND [details] -->

KIND says which test runs it. What runs, runs twice in a row in the same folder (a page's
blocks in order, then all of them again) and must pass both times: a reader runs an example
again, and one that only works on an empty folder fails them.

- ``skip``            not run here, because another check runs it: the install lines (CI
                      installs the package the same way), the test command (CI runs it, and
                      tests/test_ci_guard.py keeps .ci/run on it) and the benchmark command
                      (tests/test_benchmarks.py runs it with ``--quick``)
- ``python``          exec'd by test_readme.py, a page's blocks in one process, in one temp dir
- ``bash``            run by test_readme.py, a page's blocks in order, in one temp dir holding a
                      link ``.venv`` to the running virtualenv (so ``. .venv/bin/activate`` works
                      as in a clone), with ``.venv/bin`` first on PATH and no ``VIEWSTORE_*``
                      variable set: the store is ``viewstore.db`` in that dir, as for a reader
- ``postgres-setup``  run by test_readme.py with a stand-in for ``sudo -u postgres`` that logs in
                      as the test server's superuser; the role and database ``agent_store`` are
                      renamed. It creates them, so a second run must fail, only because they
                      exist
- ``postgres-bash``   run by test_readme.py on the database ``postgres-setup`` made (same
                      renaming, the server's address replaced by the test server's)
- ``postgres-reader`` run by test_sql_recipes.py: creates a login in the test database's reader
                      role (``viewstore_reader_agent_store`` in the block is replaced by it)
- ``recipe NAME``     an SQL recipe, run by test_sql_recipes.py on SQLite and PostgreSQL
- ``openhands``       Python needing the OpenHands SDK: run by
                      tests/openhands/test_readme_example.py on SQLite and PostgreSQL
- ``openhands-bash``  bash needing what a page's ``openhands`` blocks left in their folder (the
                      SDK's own files): run by the same test, after them, in the same folder
- ``agent-server-bash`` bash needing ``openhands-agent-server`` (``.venv-agent-server``): run by
                      tests/agent_servers/test_docs_example.py, its port replaced by a free one
- ``sketch``          Python that needs what this machine has not (FastAPI, a host named ``db``):
                      not run; test_readme.py checks that it parses and calls on ``store`` only
                      methods ``AsyncEventStore`` has
- ``cli-sketch``      commands that need hosts or conversations this machine has not: each
                      ``viewstore`` command is parsed by the CLI's own parser, not run; every
                      other line must be an ``export``
- ``sources-file``    an ingest sources file, loaded by ``viewstore.ingest.sources.Sources``
- ``masking-rules``   a masking rules file, loaded by ``viewstore.MaskingRules`` (its test is
                      in tests/test_masking_rules.py)
- ``json``            JSON (an agent server's config): parsed
- ``text``            not code (a diagram): nothing to run
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KINDS = {
    "skip",
    "python",
    "bash",
    "postgres-setup",
    "postgres-bash",
    "postgres-reader",
    "recipe",
    "openhands",
    "openhands-bash",
    "agent-server-bash",
    "sketch",
    "cli-sketch",
    "sources-file",
    "masking-rules",
    "json",
    "text",
}
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)
_MARKER = re.compile(r"<!-- doc-test: ([\w-]+)(?: ([^>]*?))? -->\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository: "README.md", "docs/cli.md"
    kind: str
    detail: str
    language: str
    code: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[str]:
    """Every page whose blocks are tested, relative to the repository."""
    docs = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md"))
    return ["README.md", "CHANGELOG.md", *docs]


def page_text(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def readme_text() -> str:
    return page_text("README.md")


def _page_blocks(page: str) -> list[Block]:
    text = page_text(page)
    found: list[Block] = []
    for fence in _FENCE.finditer(text):
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        line = text.count("\n", 0, fence.start()) + 1
        marker = _MARKER.search(before)
        assert marker is not None, f"{page}:{line}: code block without a doc-test marker"
        kind = marker.group(1)
        assert kind in KINDS, f"{page}:{line}: unknown doc-test kind {kind!r}"
        found.append(
            Block(page, kind, (marker.group(2) or "").strip(), fence.group(1), fence.group(2), line)
        )
    return found


def blocks(page: str | None = None) -> list[Block]:
    """The blocks of one page, or of every page (README.md first)."""
    return [block for name in ([page] if page else pages()) for block in _page_blocks(name)]


def blocks_of(kind: str, page: str | None = None) -> list[Block]:
    return [block for block in blocks(page) if block.kind == kind]


def pages_with(*kinds: str) -> list[str]:
    """The pages holding a block of one of ``kinds``, for parametrizing a test by page."""
    return sorted({block.page for block in blocks() if block.kind in kinds})


def recipes() -> dict[str, str]:
    return {block.detail: block.code for block in blocks_of("recipe")}


def section(title: str, page: str = "README.md") -> str:
    """The text of the ``## title`` section of a page."""
    text = page_text(page)
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]
