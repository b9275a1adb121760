"""A conversation's lifecycle: fork (a new conversation sharing another's prefix), and the
commands that remove data the sanctioned way: redact (the content of one event), compact (the
content of what every view forgot), erase (one conversation) and prune (every conversation
inactive for longer than a retention period).
Each is one transaction per conversation that leaves a record (``EventStore.redact``,
``EventStore.erase``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import click

from viewstore.cli.app import Context, UserError, cli, json_option, pass_state, printable
from viewstore.domain.errors import ConversationHasForksError

_DURATION = re.compile(r"^\s*(\d{1,6})\s*([dhms])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
#: Conversations looked up per round of a prune; each is then erased in its own transaction.
BATCH = 100
DRY_RUN_LIMIT = 10**9
#: How hard compaction works (``store.compact(pace=...)``): ``compact`` and ``retention run``.
pace_option = click.option(
    "--pace",
    type=click.FloatRange(0, 100),
    default=2.0,
    show_default=True,
    help="Rest this many times as long as each batch worked (0: flat out).",
)


def parse_duration(text: str, option: str = "--inactive-for", *, zero: bool = False) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``45s`` (``0d`` too, with ``zero``)."""
    match = _DURATION.match(text)
    if match is None or (int(match.group(1)) == 0 and not zero):
        what = "a number" if zero else "a positive number"
        raise UserError(
            f"{option} must be {what} and a unit d, h, m or s (like 90d), got {printable(text)!r}"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


@cli.command()
@click.argument("source")
@click.option("--at", "at_seq", required=True, type=int, help="The last seq the fork shares.")
@click.option("--id", "new_id", default=None, help="The fork's id (default: a new UUID).")
@json_option
@pass_state
def fork(state: Context, source: str, at_seq: int, new_id: str | None, as_json: bool) -> None:
    """Start a new conversation from a conversation's first events (shared, not copied)."""
    created = state.store.fork(source, at_seq, new_id)
    view = state.store.view(created)
    if as_json:
        origin = state.store.fork_origin(created)
        assert origin is not None
        state.print_json({"id": created, **origin.to_dict(), "view_length": len(view.events)})
        return
    state.out.print(
        f"forked {printable(source)} at seq {at_seq} as {printable(created)} "
        f"(view of {len(view.events)} events)",
        markup=False,
    )


@cli.command()
@click.argument("conversation")
@click.argument("event_id")
@click.option("--reason", required=True, help="Why (kept in the redaction record).")
@click.option(
    "--path",
    "paths",
    multiple=True,
    metavar="POINTER",
    help="Redact only the strings under this JSON Pointer (like /observation); repeatable. "
    "Default: all the event's content.",
)
@json_option
@pass_state
def redact(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    conversation: str,
    event_id: str,
    reason: str,
    paths: tuple[str, ...],
    as_json: bool,
) -> None:
    """Remove an event's content from the log and every copy; its envelope and the views stay."""
    record = state.store.redact(conversation, event_id, reason=reason, paths=paths or None)
    if as_json:
        state.print_json(record.to_dict())
        return
    what = "all its content" if record.paths is None else ", ".join(record.paths)
    state.out.print(
        f"redacted event {printable(record.event_id)} (seq {record.seq} of "
        f"{printable(record.conversation_id)}): {printable(what)}",
        markup=False,
    )


@cli.command()
@click.argument("conversation")
@click.option("--reason", required=True, help="Why (kept in the tombstone).")
@json_option
@pass_state
def erase(state: Context, conversation: str, reason: str, as_json: bool) -> None:
    """Erase a conversation: all its rows go, a tombstone stays."""
    tombstone = state.store.erase(conversation, reason=reason)
    if as_json:
        state.print_json(tombstone.to_dict())
        return
    state.out.print(
        f"erased {printable(tombstone.conversation_id)}: {tombstone.events} events, "
        f"chain ended at {tombstone.last_hash}",
        markup=False,
    )


@cli.command()
@click.option(
    "--inactive-for",
    "inactive_for",
    required=True,
    metavar="DURATION",
    help="Erase conversations not appended to for this long (90d, 12h, 30m, 45s).",
)
@click.option("--reason", default=None, help="Kept in each tombstone (default: the policy).")
@click.option("--dry-run", is_flag=True, help="List what would be erased; erase nothing.")
@json_option
@pass_state
def prune(
    state: Context, inactive_for: str, reason: str | None, dry_run: bool, as_json: bool
) -> None:
    """Erase every conversation inactive for longer than a retention period.

    A conversation with forks is erased after them, in a later round (a fork reads its
    shared prefix from it); one whose forks are still active stays. A dry run lists the
    first round only."""
    period = parse_duration(inactive_for)
    before = datetime.now(UTC) - period
    why = reason or f"retention: inactive for {inactive_for.strip()}"
    erased: list[str] = []
    if dry_run:
        found = state.store.inactive_conversations(before=before, limit=DRY_RUN_LIMIT)
        if as_json:
            state.print_json({"dry_run": True, "before": before.isoformat(), "would_erase": found})
        else:
            for key in found:
                state.out.print(printable(key), markup=False)
            state.err.print(f"would erase {len(found)} conversation(s) (dry run)")
        return
    from rich.progress import Progress  # noqa: PLC0415 - start-up time

    # Each round looks up a batch and erases it one transaction at a time: an interrupted
    # prune leaves whole conversations either erased or not, and running it again finishes.
    with Progress(console=state.err, disable=not state.err.is_terminal) as progress:
        task = progress.add_task("pruning", total=None)
        while batch := state.store.inactive_conversations(before=before, limit=BATCH):
            for key in batch:
                # Appended to (or forked) since it was listed: no longer erasable, it stays.
                try:
                    gone = state.store.erase(key, reason=why, inactive_before=before)
                except ConversationHasForksError:
                    gone = None
                if gone is not None:
                    erased.append(key)
                progress.advance(task)
    if as_json:
        state.print_json({"dry_run": False, "before": before.isoformat(), "erased": erased})
    else:
        state.out.print(
            f"erased {len(erased)} conversation(s) inactive since {before:%Y-%m-%d %H:%M} UTC"
        )


@cli.command()
@click.argument("conversation", required=False)
@pace_option
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="DURATION",
    help="Only events appended this long ago or more (30d, 12h, 30m, 45s; 0d: any age).",
)
@click.option(
    "--min-freed",
    "min_freed",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    metavar="BYTES",
    help="Leave an event whose content is smaller than what proving its removal adds.",
)
@click.option("--dry-run", is_flag=True, help="Count what would go; change nothing.")
@json_option
@pass_state
def compact(
    state: Context,
    *,
    conversation: str | None,
    older_than: str,
    min_freed: int,
    pace: float,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Remove the content of every event that every view has forgotten (docs/retention.md).

    Of CONVERSATION's own log, or of every conversation's. An event a condensation forgot,
    that no fork still holds, keeps its kind, ids, times, structure and hash; its text reads
    [compacted], and a record lets verify carry the chain across it. Views and resumes do not
    change. Safe to interrupt and run again; on PostgreSQL several may run at once."""
    period = parse_duration(older_than, "--older-than", zero=True)
    report = state.store.compact(
        conversation,
        older_than=period,
        dry_run=dry_run,
        min_freed=min_freed,
        policy=f"compact after {older_than.strip()}",
        pace=pace,
    )
    if as_json:
        state.print_json(report.to_dict())
        return
    verb = "would compact" if dry_run else "compacted"
    left = [
        f"{count} {what}"
        for count, what in (
            (report.small, "too small to free bytes"),
            (report.unverifiable, "whose chain link does not hold (see verify)"),
            (report.busy, "conversation(s) busy, for the next run"),
        )
        if count
    ]
    state.out.print(
        f"{verb} {report.events} event(s) of {report.conversations} conversation(s), "
        f"{report.bytes_freed} bytes" + (f"; left {', '.join(left)}" if left else ""),
        markup=False,
    )
