"""``viewstore ingest``: the webhook receiver for OpenHands agent servers, and ``viewstore
sync``: pull every conversation of one agent server (docs/fleet.md). Both need the ``web``
extra's uvicorn/starlette only for ``ingest``; ``sync`` needs nothing more than the store."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

from viewstore.cli.app import (
    EXIT_PROBLEMS,
    Context,
    UserError,
    cli,
    open_url,
    pass_state,
    printable,
)
from viewstore.cli.sweeping import prepare, retention_options, running

F = TypeVar("F", bound=Callable[..., Any])


def _sources_option(help_: str) -> Callable[[F], F]:
    """``--sources FILE`` (``VIEWSTORE_INGEST_SOURCES``), as both commands read it."""
    return click.option(
        "--sources",
        "sources_file",
        envvar="VIEWSTORE_INGEST_SOURCES",
        show_envvar=True,
        default=None,
        metavar="FILE",
        help=help_,
    )


@cli.command()
@click.option(
    "--url",
    "ingest_url",
    default=None,
    metavar="URL",
    help="Database URL (default: the global --url / VIEWSTORE_URL).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8766, show_default=True, help="Port."
)
@_sources_option(
    "The agent servers (TOML, or JSON by a .json suffix): [sources.NAME] url, session_api_key_env."
)
@click.option(
    "--token",
    envvar="VIEWSTORE_INGEST_TOKEN",
    show_envvar=True,
    default=None,
    help="The secret every post must carry as Authorization: Bearer TOKEN (required).",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(min=1),
    default=32 * 1024 * 1024,
    show_default=True,
    help="Larger posts are refused (413).",
)
@click.option(
    "--max-batch",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Posts of more events are refused (400).",
)
@click.option(
    "--source-threads",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Posts of one agent server worked on at once.",
)
@click.option(
    "--source-queue",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Posts of one agent server in the ingest at once, working or waiting (more: 503).",
)
@retention_options
@pass_state
def ingest(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    ingest_url: str | None,
    host: str,
    port: int,
    sources_file: str | None,
    token: str | None,
    max_body_bytes: int,
    max_batch: int,
    source_threads: int,
    source_queue: int,
    retention_policy: Path | None,
    retention_every: str,
    retention_url: str | None,
) -> None:
    """Receive OpenHands agent servers' webhooks into the store (see docs/fleet.md)."""
    try:
        import uvicorn  # noqa: PLC0415 - optional extra

        from viewstore.ingest.app import Limits, create_app  # noqa: PLC0415 - as above
    except ImportError as error:
        raise UserError(
            f"the ingest needs the 'web' extra: pip install -e '.[web]' (in a clone) ({error})"
        ) from error
    from viewstore.ingest.sources import Sources  # noqa: PLC0415 - start-up time
    from viewstore.store import EventStore  # noqa: PLC0415 - start-up time

    url = ingest_url or state.url
    store = open_url(url, lambda url: EventStore(url, schema=state.schema, masking=state.masking))
    store.conversation_count()  # a bad URL or a missing schema fails here, in one line
    if not token:
        raise UserError("the ingest needs a token: set VIEWSTORE_INGEST_TOKEN (or --token)")
    sources = Sources.load(sources_file)
    if not sources.by_name:
        raise UserError(
            "no agent servers configured: name a sources file with --sources or "
            "VIEWSTORE_INGEST_SOURCES (docs/fleet.md)"
        )
    limits = Limits(
        max_body_bytes=max_body_bytes,
        max_batch=max_batch,
        source_threads=source_threads,
        source_queue=max(source_queue, source_threads),
    )
    sweeper = prepare(
        state,
        url,
        retention_policy=retention_policy,
        retention_every=retention_every,
        retention_url=retention_url,
    )
    app = create_app(store, token=token, sources=sources, limits=limits)
    click.echo(
        f"viewstore ingest on http://{host}:{port}/ ({len(sources.by_name)} agent server(s))",
        err=True,
    )
    with running(sweeper):
        uvicorn.run(app, host=host, port=port, log_level="warning")


@cli.command()
@click.argument("agent_server")
@_sources_option("The sources file: AGENT_SERVER may be one of its names.")
@click.option(
    "--session-api-key",
    envvar="VIEWSTORE_SYNC_SESSION_API_KEY",
    show_envvar=True,
    default=None,
    help="The agent server's session API key, when AGENT_SERVER is a URL.",
)
@click.option(
    "--name",
    default=None,
    help="The source name recorded for a URL (default: its host:port).",
)
@pass_state
def sync(
    state: Context,
    agent_server: str,
    sources_file: str | None,
    session_api_key: str | None,
    name: str | None,
) -> None:
    """Pull every conversation of an agent server (a URL or a source name) into the store.

    Resumable and idempotent: each conversation continues from its last stored event."""
    from viewstore.ingest.sources import Source, Sources, check_name, check_url  # noqa: PLC0415
    from viewstore.ingest.sync import sync_source  # noqa: PLC0415 - start-up time

    sources = Sources.load(sources_file)
    source = sources.by_name.get(agent_server)
    if source is None:
        if "://" not in agent_server:
            raise UserError(f"{agent_server!r} is neither a URL nor a configured source name")
        url = check_url(agent_server)
        source = Source(check_name(name or urlsplit(url).netloc.replace(":", "-")), url,
                        session_api_key)  # fmt: skip
    store = state.store
    total = refused = 0
    for report in sync_source(store, source):
        key = printable(report.conversation_id)
        if report.result is None:
            refused += 1
            click.echo(f"{key}  refused: {printable(report.refused or '')}")
            continue
        total += report.result.appended
        click.echo(f"{key}  version {report.result.version}  +{report.result.appended}")
    click.echo(f"{source.name}: {total} event(s) appended", err=True)
    if refused:
        click.echo(f"{source.name}: {refused} conversation(s) refused (listed above)", err=True)
        sys.exit(EXIT_PROBLEMS)


@cli.command("hand-over")
@click.argument("conversation_id")
@click.argument("source")
@pass_state
def hand_over(state: Context, conversation_id: str, source: str) -> None:
    """Make SOURCE (an agent server's name) the owner of a conversation, in the ingest.

    Only the owner's posts and syncs may add to a conversation or describe it; use this when
    another agent server takes the conversation over (docs/fleet.md, "Ownership")."""
    from viewstore.ingest.sources import check_name  # noqa: PLC0415 - start-up time

    previous = state.store.hand_over(conversation_id, check_name(source))
    was = "no source" if previous is None else repr(previous)
    click.echo(f"{printable(conversation_id)}: owner {source!r} (was {was})")
