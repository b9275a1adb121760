"""``viewstore serve``: the read-only web viewer (the ``web`` extra: starlette, jinja2, uvicorn).

The web stack is imported inside the command, so the rest of the CLI works without it.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from pathlib import Path

import click

from viewstore.cli.app import Context, UserError, cli, open_url, pass_state
from viewstore.cli.sweeping import prepare, retention_options, running


@cli.command()
@click.option(
    "--url",
    "serve_url",
    default=None,
    metavar="URL",
    help="Database URL (default: the global --url / VIEWSTORE_URL).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on.",
)
@click.option(
    "--token",
    envvar="VIEWSTORE_SERVE_TOKEN",
    default=None,
    show_envvar=True,
    help="Require this secret: Authorization: Bearer TOKEN, or ?token=TOKEN once in a browser "
    "(then a cookie). Default: no token.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes (each with its own connections): a page's rendering holds one "
    "CPU, so N processes serve up to N cores.",
)
@retention_options
@pass_state
def serve(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    serve_url: str | None,
    host: str,
    port: int,
    token: str | None,
    workers: int,
    retention_policy: Path | None,
    retention_every: str,
    retention_url: str | None,
) -> None:
    """Serve a read-only web viewer of the conversations."""
    try:
        import uvicorn  # noqa: PLC0415 - optional extra, see the module docstring

        from viewstore.web import create_app  # noqa: PLC0415 - as above
        from viewstore.web.app import WORKER_SETTINGS  # noqa: PLC0415 - as above
    except ImportError as error:
        raise UserError(
            f"the web viewer needs the 'web' extra: pip install -e '.[web]' (in a clone) ({error})"
        ) from error
    url = serve_url or state.url
    app = open_url(url, lambda url: create_app(url, schema=state.schema, token=token))
    app.state.store.conversations()  # a bad URL or a missing schema fails here, in one line
    _check_address(host, port)
    sweeper = prepare(
        state,
        url,
        retention_policy=retention_policy,
        retention_every=retention_every,
        retention_url=retention_url,
    )
    guarded = ", token required" if token else ""
    processes = f", {workers} processes" if workers > 1 else ""
    click.echo(
        f"viewstore viewer on http://{host}:{port}/ (read-only{guarded}{processes})", err=True
    )
    # An open page of the list keeps a stream of the change feed open (/api/feed/follow), which
    # never ends by itself: on Ctrl-C or SIGTERM give requests 2 s, then cut the streams (the
    # browser resumes from its last event when the viewer is back).
    # The sweeper is a thread of this process, also with --workers: one sweeper, not one
    # per worker.
    with running(sweeper):
        if workers == 1:
            uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
            return
        app.state.store.close()  # checked; each worker opens its own
        settings = {"url": url, "schema": state.schema, "token": token}
        os.environ[WORKER_SETTINGS] = json.dumps(settings)
        uvicorn.run(
            "viewstore.web.app:worker_app",
            factory=True,
            workers=workers,
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=2,
        )


def _check_address(host: str, port: int) -> None:
    """Bind ``host:port`` once and let it go, as uvicorn is about to bind it: an address in
    use (or one this machine does not have) is then said in one line, before the viewer's URL
    is printed, rather than by uvicorn's log after it and an exit code of its own."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            # As uvicorn binds: a port whose last connections are still closing is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as error:
        hint = "; give another --port" if error.errno == errno.EADDRINUSE else ""
        reason = error.strerror or str(error)
        raise UserError(f"cannot listen on {host}:{port}: {reason}{hint}") from error
