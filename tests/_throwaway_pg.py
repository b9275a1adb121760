"""A PostgreSQL server of the test session's own, for a machine with PostgreSQL's binaries but
no ``VIEWSTORE_TEST_POSTGRES_URL``.

The README's test command must test everything where it can: a developer with PostgreSQL
installed (Debian's ``postgresql`` package, Homebrew's, a distribution's) has ``initdb`` and
``pg_ctl`` but need not have a running server, a role or a database. The session's controller
initialises a cluster in a temporary folder, starts it on a free port and hands its URL to the
xdist workers through the environment (they inherit it when they are spawned, after
``pytest_configure``), and stops and removes it at the end.

The server is a real PostgreSQL of the installed version. It runs without durability
(``fsync=off``, ``synchronous_commit=off``, ``full_page_writes=off``) because nothing in it
outlives the session; no test depends on surviving a crash of the server itself.

PostgreSQL refuses to run as root: under root (CI containers) the cluster belongs to the
``postgres`` account that the distribution's package creates, and the binaries run through
``runuser``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Where distributions put the binaries when they are not on PATH (Debian, Ubuntu; Homebrew's
#: and most others' are on PATH).
_KNOWN_BIN_DIRS = (
    "/usr/lib/postgresql/*/bin",
    "/usr/pgsql-*/bin",
    "/opt/homebrew/opt/postgresql*/bin",
)

_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    # Every xdist worker holds a pool, and the race tests start several processes each.
    "max_connections": "300",
    "shared_buffers": "128MB",
}


def binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: PATH first, then the newest known folder."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).parent
    candidates: list[Path] = []
    for pattern in _KNOWN_BIN_DIRS:
        candidates.extend(Path("/").glob(pattern.lstrip("/")))
    usable = [c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()]
    return max(usable, key=_version_key) if usable else None


def _version_key(folder: Path) -> tuple[int, ...]:
    digits = "".join(ch if ch.isdigit() else " " for ch in str(folder)).split()
    return tuple(int(d) for d in digits)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThrowawayUnavailable(RuntimeError):
    """No binaries, or the server did not start: the reason, for the skip message."""


@dataclass
class ThrowawayPostgres:
    folder: Path
    bin_dir: Path
    port: int
    prefix: tuple[str, ...]  # runuser under root

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    @classmethod
    def start(cls) -> ThrowawayPostgres:
        bin_dir = binaries()
        if bin_dir is None:
            raise ThrowawayUnavailable("no initdb/pg_ctl on PATH or in /usr/lib/postgresql")
        folder = Path(tempfile.mkdtemp(prefix="viewstore-test-pg-"))
        prefix: tuple[str, ...] = ()
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(folder, ignore_errors=True)
                raise ThrowawayUnavailable(
                    "running as root and no 'postgres' account to run the server as"
                ) from None
            os.chown(folder, account.pw_uid, account.pw_gid)
            prefix = ("runuser", "-u", "postgres", "--")
        server = cls(folder, bin_dir, _free_port(), prefix)
        try:
            server._init_and_start()
        except (OSError, subprocess.CalledProcessError) as exc:
            log = server._log_tail()
            server.stop()
            raise ThrowawayUnavailable(f"{type(exc).__name__}: {exc} {log}".strip()) from exc
        return server

    def _run(self, *command: str) -> None:
        subprocess.run(
            [*self.prefix, *command],
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
        )

    def _init_and_start(self) -> None:
        data = self.folder / "data"
        self._run(
            str(self.bin_dir / "initdb"),
            "-D", str(data),
            "-U", "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )  # fmt: skip
        options = " ".join(f"-c {key}={value}" for key, value in _SETTINGS.items())
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D", str(data),
            "-l", str(self.folder / "server.log"),
            "-o", f"-p {self.port} -k {self.folder} {options}",
            "-w",
            "start",
        )  # fmt: skip

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.folder / "server.log").read_text(errors="replace")[-500:]
        return ""

    def stop(self) -> None:
        data = self.folder / "data"
        if (data / "postmaster.pid").exists():
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self._run(str(self.bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)
