"""The installed ``viewstore`` console script, run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "viewstore"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any VIEWSTORE_* setting of the developer's shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIEWSTORE_")}
    env.update(extra)
    return env


def run(
    *args: str,
    url: str | None = None,
    input: str | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``viewstore [--url URL] ARGS...``: exit code, stdout and stderr as text."""
    command = [str(SCRIPT), *(["--url", url] if url else []), *args]
    return subprocess.run(
        command,
        check=False,
        input=input,
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """A user error: exit 2, nothing on stdout, exactly one line on stderr, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), done.stderr
    return lines[0]
