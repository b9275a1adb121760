"""Commands that read or check the store: init, append, view, events, indices, verify,
checkpoint, rebuild, stats, demo.

Start-up time: the rich tables, the progress bar, the stats queries and the demo are imported
by the commands that use them, so that `indices` or `verify` loads none of them; commands that
print plain lines print them with click rather than through a rich console.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from viewstore.cli.app import (
    EXIT_PROBLEMS,
    Context,
    UserError,
    as_of_option,
    cli,
    json_option,
    pass_state,
)
from viewstore.domain.errors import DuplicateEventError, InvalidEventError

if TYPE_CHECKING:
    from viewstore.domain.events import Event
    from viewstore.store import VerifyReport


@cli.command()
@click.option(
    "--partitions",
    type=click.IntRange(1, 1024),
    default=None,
    help="PostgreSQL, a new store: hash-partition every table into N partitions.",
)
@json_option
@pass_state
def init(state: Context, partitions: int | None, as_json: bool) -> None:
    """Create or migrate the database schema to the newest revision."""
    state.store.create_schema(partitions=partitions)
    head = state.store.schema_revision()
    if as_json:
        state.print_json({"revision": head})
    else:
        state.out.print(f"schema is at revision {head}")


def _read_jsonl(handle: IO[str], name: str, max_bytes: int) -> tuple[list[Event], list[int]]:
    from viewstore.domain.events import parse_event  # noqa: PLC0415 - start-up time

    text = handle.read()
    events: list[Event] = []
    lines: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(parse_event(line, max_bytes=max_bytes))
        except InvalidEventError as error:
            raise UserError(_not_jsonl(text, name) or f"{name}: line {number}: {error}") from error
        lines.append(number)
    if not events:
        raise UserError(f"{name}: no events (expected one JSON object per line)")
    return events, lines


def _not_jsonl(text: str, name: str) -> str | None:
    """The message for a file that is JSON, but not one object per line (pretty-printed);
    None when it is not that (a bad line of a JSONL file is reported as such)."""
    if sum(1 for line in text.splitlines() if line.strip()) < 2:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list):
        return (
            f"{name}: a JSON array; append expects one event object per line (JSONL), "
            f"e.g. `jq -c '.[]' {name}`"
        )
    return (
        f"{name}: one JSON value over several lines; append expects one event object per "
        f"line (JSONL), e.g. `jq -c . {name}`"
    )


@cli.command()
@click.argument("conversation")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--expected-version",
    type=click.IntRange(min=0),
    default=None,
    help="Append only if the conversation has exactly this many events (0: must be new).",
)
@json_option
@pass_state
def append(
    state: Context, conversation: str, file: IO[str], expected_version: int | None, as_json: bool
) -> None:
    """Append OpenHands events (JSONL, one event per line; - for stdin) in one transaction."""
    name = "<stdin>" if file is sys.stdin or getattr(file, "name", "-") == "<stdin>" else file.name
    try:
        events, lines = _read_jsonl(file, name, state.store.max_event_bytes)
    except UnicodeDecodeError as error:
        raise UserError(f"{name}: not valid UTF-8 ({error.reason})") from error
    state.create_if_new()
    try:
        result = state.store.append(conversation, events, expected_version=expected_version)
    except (InvalidEventError, DuplicateEventError) as error:
        index = getattr(error, "index", None)
        if index is None:  # a duplicate: the first line holding its id
            index = next((i for i, e in enumerate(events) if e.id == error.event_id), None)
        if index is None or index >= len(lines):
            raise
        event_id = error.event_id if error.event_id is not None else events[index].id
        raise UserError(
            f"{name}: line {lines[index]} (event id {event_id!r}): {error.reason}"
        ) from error
    if as_json:
        state.print_json(
            {
                "conversation_id": result.conversation_id,
                "version": result.version,
                "appended": result.appended,
                "duplicates": result.duplicates,
            }
        )
        return
    state.out.print(
        f"{result.conversation_id}: appended {len(result.appended)} event(s), "
        f"{len(result.duplicates)} already stored; version {result.version}"
    )


@cli.command()
@click.argument("conversation")
@as_of_option("The live view")
@click.option(
    "--resume",
    is_flag=True,
    help="The resume view: View.from_events over the whole log, as OpenHands "
    "computes it when it loads a conversation from disk.",
)
@click.option(
    "--payloads",
    is_flag=True,
    help="With --json: add each event of the view as its JSON object, in view order.",
)
@json_option
@pass_state
def view(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    conversation: str,
    as_of: int | None,
    resume: bool,
    payloads: bool,
    as_json: bool,
) -> None:
    """Show a conversation's view: what the LLM is sent, and where a condenser may cut."""
    from viewstore.cli.render import print_table, view_table  # noqa: PLC0415 - start-up time

    if resume and as_of is not None:
        raise click.UsageError("--resume and --as-of cannot be combined")
    if payloads and not as_json:
        raise click.UsageError("--payloads goes with --json (the table shows a preview)")
    if resume:
        stored = state.store.resume_view(conversation)
        title = f"{stored.conversation_id}: resume view (View.from_events)"
    else:
        stored = state.store.view(conversation, as_of=as_of)
        when = "now" if as_of is None else f"right after event {as_of}"
        title = f"{stored.conversation_id}: live view {when}"
    if as_json:
        document = stored.to_dict()
        if payloads:
            document["payloads"] = [json.loads(text) for text in stored.payloads]
        state.print_json(document)
    else:
        print_table(state.out, view_table(state.out, stored, title=title))


@cli.command()
@click.argument("conversation")
@click.option(
    "--after",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Only events with seq greater than this.",
)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most this many.")
@json_option
@pass_state
def events(state: Context, conversation: str, after: int, limit: int | None, as_json: bool) -> None:
    """List a conversation's stored events (the log, in append order)."""
    from viewstore.cli.render import events_table, print_table  # noqa: PLC0415 - start-up

    stored = state.store.events(conversation, after=after, limit=limit)
    if as_json:
        state.print_json(
            [
                {"seq": e.seq, "event_id": e.event_id, "kind": e.kind, "payload": e.payload}
                for e in stored
            ]
        )
    else:
        table = events_table(state.out, stored, title=f"{conversation}: events after {after}")
        print_table(state.out, table)


@cli.command()
@click.argument("conversation")
@as_of_option("The indices")
@json_option
@pass_state
def indices(state: Context, conversation: str, as_of: int | None, as_json: bool) -> None:
    """Print the manipulation indices of a conversation's live view."""
    stored = state.store.view(conversation, as_of=as_of)
    if as_json:
        state.print_json(
            {
                "conversation_id": stored.conversation_id,
                "version": stored.version,
                "manipulation_indices": stored.manipulation_indices,
            }
        )
    else:
        click.echo(" ".join(str(i) for i in stored.manipulation_indices))


def _report_dict(report: VerifyReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "conversations": [
            {
                "conversation_id": r.conversation_id,
                "version": r.version,
                "ok": r.ok,
                "problems": r.problems,
                "notes": r.notes,
            }
            for r in report.conversations
        ],
    }


@cli.command()
@click.argument("conversation", required=False)
@click.option(
    "--against",
    "against",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="A checkpoint written by `viewstore checkpoint`: every history it saw must still be "
    "there, unchanged, under the same conversation id.",
)
@json_option
@pass_state
def verify(state: Context, conversation: str | None, against: Path | None, as_json: bool) -> None:
    """Check the hash chain, every column derived from the log, that the view rows equal a
    replay, and that each stored base state is a JSON object (exit 1 on problems)."""
    checkpoint = None if against is None else _read_checkpoint(against)
    report = state.store.verify(conversation, against=checkpoint)
    if as_json:
        state.print_json(_report_dict(report))
    else:
        click.echo(report.render())
    if not report.ok:
        sys.exit(EXIT_PROBLEMS)


def _read_checkpoint(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"cannot read checkpoint {str(path)!r}: {error}") from error


@cli.command()
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the checkpoint to this file (default: standard output).",
)
@pass_state
def checkpoint(state: Context, output: Path | None) -> None:
    """Print the chain heads of every conversation and one digest over them, as JSON: keep it
    outside the database, and check later with `viewstore verify --against FILE`."""
    heads = state.store.checkpoint()
    text = json.dumps(heads, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        raise UserError(f"cannot write checkpoint {str(output)!r}: {error}") from error
    click.echo(
        f"checkpoint of {len(heads['conversations'])} conversation(s) written to {output}; "
        f"digest {heads['digest']}",
        err=True,
    )


@cli.command()
@click.argument("conversation", required=False)
@json_option
@pass_state
def rebuild(state: Context, conversation: str | None, as_json: bool) -> None:
    """Rewrite the view and index rows from the event log (one transaction each)."""
    from rich.progress import Progress  # noqa: PLC0415 - start-up time

    keys = [conversation] if conversation is not None else state.store.conversation_ids()
    with Progress(console=state.err, disable=not state.err.is_terminal) as progress:
        task = progress.add_task("rebuilding", total=len(keys))
        for key in keys:
            state.store.rebuild(key)
            progress.advance(task)
    if as_json:
        state.print_json({"rebuilt": len(keys)})
    else:
        state.out.print(f"rebuilt {len(keys)} conversation(s)")


@cli.command()
@click.option(
    "--fast",
    is_flag=True,
    help="estimates where counting is dear (PostgreSQL above 10,000 rows); "
    "no view sizes or events per kind",
)
@json_option
@pass_state
def stats(state: Context, fast: bool, as_json: bool) -> None:
    """Counts: conversations, events, view sizes, condensations."""
    numbers = state.store.stats(fast=fast).to_dict()
    if not fast:
        del numbers["exact"]  # every count of the full form is exact
    if as_json:
        state.print_json(numbers)
        return
    if fast:
        for name in ("conversations", "events", "condensations"):
            about = "" if numbers["exact"][name] else "about "
            click.echo(f"{name + ':':<15}{about}{numbers[name]}")
        return
    sizes = numbers["view_sizes"]
    click.echo(
        f"conversations: {numbers['conversations']}\n"
        f"events:        {numbers['events']}\n"
        f"condensations: {numbers['condensations']}\n"
        f"view sizes:    min {sizes['min']}, mean {sizes['mean']}, max {sizes['max']}"
    )
    kinds = numbers["events_by_kind"]
    if kinds:
        click.echo("events by kind:")
        width = max(len(kind) for kind in kinds)
        for kind, count in kinds.items():
            click.echo(f"  {kind:<{width}}  {count:>8}")


def _refuse_foreign_database(state: Context) -> None:
    """The demo creates the schema on its own, but not in a database that already holds
    someone else's tables: adding viewstore's there is for `viewstore init` to do, on purpose."""
    if state.store.schema_revision() is not None:
        return
    from sqlalchemy import inspect  # noqa: PLC0415 - start-up time

    tables = sorted(inspect(state.store.engine).get_table_names())
    if tables:
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        raise UserError(
            f"the database holds other tables ({shown}) and no viewstore schema: the demo "
            "will not add viewstore's tables there; run `viewstore init` first if they belong "
            "there, or give the demo another --url (or --schema)"
        )


@cli.command()
@click.option(
    "--conversation",
    default=None,
    help="Conversation id (default: a fresh one each run; an existing one is shown).",
)
@json_option
@pass_state
def demo(state: Context, conversation: str | None, as_json: bool) -> None:
    """Build a realistic OpenHands conversation step by step and show its live view."""
    from viewstore.cli.render import print_table, view_table  # noqa: PLC0415 - start-up time
    from viewstore.demo import run_demo  # noqa: PLC0415 - as above

    _refuse_foreign_database(state)
    result = run_demo(state.store, conversation)
    key = result.conversation_id
    if as_json:
        state.print_json(result.view.to_dict())
        return
    out = state.out
    if result.created:
        out.print(f"[bold]demo conversation {key}[/] appended in {len(result.steps)} steps:")
        for title, version in result.steps:
            out.print(f"  version {version:>2}: {title}")
    else:
        out.print(f"[bold]conversation {key} already exists[/]; its live view:")
    out.print()
    print_table(out, view_table(out, result.view, title=f"{key}: live view now"))
    if result.created:
        flagged = state.store.view(key, as_of=result.request_seq)
        out.print(
            f"\nRight after event {result.request_seq} (the CondensationRequest) the "
            f"unhandled-request flag was "
            f"{'up' if flagged.unhandled_condensation_request else 'down'}; the condensation "
            "right after it forgot the tool batch and inserted a summary at position 2."
        )
    out.print(
        f"\nTry: viewstore view {key} --as-of {max(result.request_seq, 1)}   ·   "
        f"viewstore view {key} --resume   ·   viewstore verify {key}"
    )
