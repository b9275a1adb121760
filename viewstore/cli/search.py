"""``viewstore search``: full-text search over every conversation's events (docs/search.md)."""

from __future__ import annotations

import click

from viewstore.cli.app import Context, cli, json_option, pass_state
from viewstore.cli.catalogue import _moment


@cli.command()
@click.argument("query")
@click.option("--conversation", default=None, metavar="ID", help="Only this conversation.")
@click.option("--kind", "kinds", multiple=True, metavar="KIND", help="Only events of this kind.")
@click.option(
    "--source", "sources", multiple=True, metavar="SOURCE", help="Only events of this source."
)
@click.option(
    "--window",
    type=click.Choice(["live", "forgotten"]),
    default=None,
    help="Only events in the live view now, or only those a condensation forgot.",
)
@click.option("--since", default=None, metavar="WHEN", help="Appended at or after (ISO 8601).")
@click.option("--until", default=None, metavar="WHEN", help="Appended before (ISO 8601).")
@click.option("--limit", type=click.IntRange(1, 200), default=20, show_default=True)
@click.option("--after", default=None, metavar="CURSOR", help="The next page's cursor.")
@json_option
@pass_state
def search(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    query: str,
    conversation: str | None,
    kinds: tuple[str, ...],
    sources: tuple[str, ...],
    window: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    """Find the events whose text holds every word of QUERY, best first: conversation, seq,
    kind, whether it is in the live view, and a snippet."""
    page = state.store.search(
        query,
        conversation_id=conversation,
        kinds=list(kinds) or None,
        sources=list(sources) or None,
        since=None if since is None else _moment(since),
        until=None if until is None else _moment(until),
        window=window,
        after=after,
        limit=limit,
    )
    if as_json:
        state.print_json(page.to_dict())
        return
    for hit in page.hits:
        where = "live" if hit.in_live_view else "-"
        state.out.print(
            f"{hit.conversation_id}  seq {hit.seq}  {hit.kind}  {where}  {hit.snippet}",
            markup=False,
        )
    if not page.hits:
        state.err.print("no events hold every word", markup=False)
    if page.next_cursor is not None:
        state.out.print(f"next page: --after {page.next_cursor}", markup=False)
