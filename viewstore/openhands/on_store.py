"""Run ``openhands-agent-server`` on a viewstore: import this module through the server's own
hook, and its conversations live in the store instead of its ``conversations_path``::

    VIEWSTORE_URL=postgresql+psycopg://.../agents \\
        python -m openhands.agent_server --import-modules viewstore.openhands.on_store

``VIEWSTORE_URL`` (required) names the store, made with ``viewstore init``.
``VIEWSTORE_SERVER_NAME`` names this server in leases and logs (default: the host name).
``VIEWSTORE_IDLE_SECONDS`` is how long a conversation may sit idle before this server lets it
go, so another server may run it (default 30). ``VIEWSTORE_RETENTION_POLICY`` (a policy file,
docs/retention.md) has a thread of this server apply it every ``VIEWSTORE_RETENTION_EVERY``
(default 1h), signed in at ``VIEWSTORE_RETENTION_URL`` (default ``VIEWSTORE_URL``).
docs/agent-servers.md has the rest.
"""

from __future__ import annotations

import atexit
import os
import socket

from viewstore.domain.errors import InvalidArgumentError
from viewstore.openhands.server_internals import install
from viewstore.store import EventStore
from viewstore.sweeper import from_environment


def _from_environment() -> None:
    url = os.environ.get("VIEWSTORE_URL")
    if not url:
        raise SystemExit(
            "viewstore.openhands.on_store: set VIEWSTORE_URL to the store's URL "
            "(made with `viewstore init`)"
        )
    idle = os.environ.get("VIEWSTORE_IDLE_SECONDS", "30")
    try:
        idle_seconds = float(idle)
    except ValueError:
        raise SystemExit(
            f"VIEWSTORE_IDLE_SECONDS must be a number of seconds, got {idle!r}"
        ) from None
    try:
        sweeper = from_environment(url)
    except InvalidArgumentError as error:
        raise SystemExit(f"viewstore.openhands.on_store: {error}") from None
    store = EventStore(url)
    if store.schema_revision() is None:
        raise SystemExit(f"viewstore.openhands.on_store: no store at {url!r}: run `viewstore init`")
    name = os.environ.get("VIEWSTORE_SERVER_NAME") or socket.gethostname()
    install(store, name=name, idle_seconds=idle_seconds)
    if sweeper is not None:
        sweeper.start()
        atexit.register(sweeper.stop, timeout=2)


_from_environment()
