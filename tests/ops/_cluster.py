"""A PostgreSQL cluster of the tests' own, to restart at will (the shared server on 5432 is
never restarted: other test runs use it at the same time).

It lives in a fresh folder under /tmp, listens on a free port of 127.0.0.1 and asks for a
password on TCP (scram-sha-256), so a wrong password can be tested too. PostgreSQL refuses to
run as root: as root, every server command runs as the ``postgres`` OS user (``runuser``),
which owns the folder.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SERVER_USER = "postgres"


def server_bin() -> Path | None:
    """The folder of initdb and pg_ctl: ``VIEWSTORE_TEST_PG_BIN``, else the newest installed
    under /usr/lib/postgresql."""
    override = os.environ.get("VIEWSTORE_TEST_PG_BIN")
    candidates = [Path(override)] if override else []
    installed = Path("/usr/lib/postgresql")
    if installed.is_dir():
        versions = sorted(installed.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0)
        candidates += [version / "bin" for version in reversed(versions)]
    return next((c for c in candidates if (c / "initdb").is_file()), None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Cluster:
    """``create()`` then ``start()``; ``restart(mode)``, ``stop(mode)``; ``destroy()`` stops it
    and removes every file."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="viewstore-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.password = secrets.token_hex(8)
        self._as_root = os.geteuid() == 0
        if self._as_root:
            owner = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.root.chmod(0o700)

    def url(self, database: str = "postgres", *, password: str | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql+psycopg://postgres:{secret}@127.0.0.1:{self.port}/{database}"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self._as_root:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")

    def create(self) -> None:
        password_file = self.root / "password"
        password_file.write_text(self.password + "\n", encoding="utf-8")
        if self._as_root:
            shutil.chown(password_file, SERVER_USER)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
            "--auth-host=scram-sha-256", f"--pwfile={password_file}", "--no-sync",
        )  # fmt: skip
        password_file.unlink()

    def start(self) -> None:
        # fsync off: the restarts here stop the server, never the machine, and the shared
        # machine's disk is spared.
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=40 -c shared_buffers=16MB"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options,
                  "-w", "start")  # fmt: skip

    def stop(self, mode: str, *, wait: bool = True, if_running: bool = False) -> None:
        """``if_running``: a server that has stopped already (a smart shutdown that finished
        on its own) is no error."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w" if wait else "-W", "stop")
        except RuntimeError as error:
            if not (if_running and "Is server running?" in str(error)):
                raise

    def restart(self, mode: str) -> None:
        """``pg_ctl restart -m fast`` (sessions are told to end) or ``-m immediate`` (the
        server dies without a word and recovers from its log on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "restart",
                  "-l", str(self.root / "log"))  # fmt: skip

    def destroy(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
