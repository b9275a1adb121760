"""``list`` (the conversation catalogue) and ``feed`` (the change feed, optionally followed)."""

from __future__ import annotations

import json
from contextlib import closing
from datetime import UTC, datetime

import click

from viewstore.cli.app import Context, cli, json_option, pass_state
from viewstore.store import MAX_FEED_LIMIT, MAX_LIMIT, FeedEntry, Order

_ORDERS: dict[str, Order] = {
    "id": "id",
    "created": "created_at",
    "updated": "updated_at",
    "version": "version",
    "view-length": "view_length",
}
_FEED_PAGE = 1000


def _moment(text: str) -> datetime:
    """An ISO 8601 date or time; without an offset it is taken as UTC, like the store's."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError as error:
        raise click.BadParameter(f"not an ISO 8601 date or time: {text!r}") from error
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@cli.command("list")
@click.option(
    "--order",
    type=click.Choice(list(_ORDERS)),
    default="id",
    show_default=True,
    help="Sort key (ties in id order).",
)
@click.option("--desc", is_flag=True, help="Reverse the order.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=None, help="At most N.")
@click.option("--offset", type=click.IntRange(min=0), default=0, help="Skip the first N.")
@click.option(
    "--after",
    default=None,
    metavar="CURSOR",
    help="Start after this cursor (printed under a page that has a next one, and with every "
    "--json record), of the same --order and --desc.",
)
@click.option(
    "--updated-since",
    default=None,
    metavar="WHEN",
    help="Only conversations appended to at or after WHEN (ISO 8601; UTC if no offset).",
)
@click.option(
    "--min-view-length",
    type=click.IntRange(min=0),
    default=None,
    help="Only conversations whose live view holds at least N events.",
)
@json_option
@pass_state
def list_(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    order: str,
    desc: bool,
    limit: int | None,
    offset: int,
    after: str | None,
    updated_since: str | None,
    min_view_length: int | None,
    as_json: bool,
) -> None:
    """The conversations, two lines each: id, last activity (UTC), events, live view
    length, agent server and its status ("-": none said); then its title (the agent
    server's, else the first user message), after "[condensation requested]" if one
    waits. --json adds the creation time, the last event's kind and the model.
    With --limit, a page: the cursor of the next one is printed under it (pass it as
    --after; a deep page costs what the first does, where --offset reads what it skips)."""
    since = None if updated_since is None else _moment(updated_since)
    records = state.store.conversations(
        order_by=_ORDERS[order],
        descending=desc,
        # one more than asked: whether a next page exists
        limit=None if limit is None else min(limit + 1, MAX_LIMIT),
        offset=offset,
        updated_since=since,
        min_view_length=min_view_length,
        after=after,
    )
    more = limit is not None and len(records) > limit
    records = records[:limit] if limit is not None else records
    if as_json:
        state.print_json(
            [
                {**record.to_dict(), "cursor": record.cursor(_ORDERS[order], desc)}
                for record in records
            ]
        )
        return
    from viewstore.cli.render import catalogue_lines, width_for  # noqa: PLC0415 - start-up

    out = state.out
    lines = [f"{len(records)} conversation(s)", *catalogue_lines(records, width_for(out))]
    for i, line in enumerate(lines):
        style = "bold" if i == 1 else None  # the header, as the tables have it
        out.print(line, style=style, markup=False, highlight=False, emoji=False, soft_wrap=True)
    if more:
        click.echo(f"next page: --after {records[-1].cursor(_ORDERS[order], desc)}")


def _print_entry(entry: FeedEntry, as_json: bool) -> None:
    if as_json:
        fields = ("cursor", "conversation_id", "seq", "event_id", "kind")
        click.echo(json.dumps({name: getattr(entry, name) for name in fields}))
    else:
        click.echo(
            f"{entry.cursor}\t{entry.conversation_id}\t{entry.seq}\t{entry.kind}\t{entry.event_id}"
        )


@cli.command()
@click.option("--after", default=None, metavar="CURSOR", help="Start after this cursor.")
@click.option("--limit", type=click.IntRange(1, MAX_FEED_LIMIT), default=None, help="Stop after N.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing events as they commit.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05, max=3600),
    default=1.0,
    show_default=True,
    help="With --follow: the longest wait between reads (PostgreSQL wakes on each commit; "
    "SQLite polls, from 50 ms up to this).",
)
@json_option
@pass_state
def feed(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    after: str | None,
    limit: int | None,
    follow: bool,
    interval: float,
    as_json: bool,
) -> None:
    """The change feed: every conversation's events in commit order, one per line
    (cursor, conversation, seq, kind, event id; --json: one JSON object per line).
    Pass the last cursor as --after to go on where it stopped."""
    if follow:
        _follow(state, after, limit, interval, as_json)
        return
    printed = 0
    cursor = after
    while limit is None or printed < limit:
        page = _FEED_PAGE if limit is None else min(_FEED_PAGE, limit - printed)
        entries = state.store.feed(after=cursor, limit=page)
        for entry in entries:
            _print_entry(entry, as_json)
        printed += len(entries)
        if not entries:
            return
        cursor = entries[-1].cursor


def _follow(
    state: Context, after: str | None, limit: int | None, interval: float, as_json: bool
) -> None:
    """``store.follow()`` printed line by line until --limit, or quietly until Ctrl-C."""
    printed = 0
    try:
        with closing(state.store.follow(after, poll=interval, limit=_FEED_PAGE)) as entries:
            for entry in entries:
                _print_entry(entry, as_json)
                printed += 1
                if limit is not None and printed >= limit:
                    return
    except KeyboardInterrupt:
        return


@cli.command("refresh")
@click.option(
    "--full", is_flag=True, help="Look at every conversation, not only those changed lately."
)
@json_option
@pass_state
def refresh_sizes(state: Context, full: bool, as_json: bool) -> None:
    """Bring the catalogue's copies of each conversation's events and live view length up
    to date: the orders --order version and --order view-length read them. A list in those
    orders does this itself where it may write; a store only read-only viewers list (the
    viewer is one) stays exact without it, but each list then reads every change since."""
    count = state.store.refresh_catalogue_sizes(full=full)
    if as_json:
        state.print_json({"refreshed": count})
    else:
        click.echo(f"refreshed the sizes of {count} conversation(s)")
