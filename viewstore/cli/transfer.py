"""``import`` and ``export``: OpenHands conversation folders in and out of the store."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from viewstore.cli.app import (
    EXIT_USAGE,
    Context,
    UserError,
    cli,
    json_option,
    pass_state,
    printable,
)
from viewstore.cli.render import new_table, print_table
from viewstore.domain.errors import ConcurrencyError, ImportFileError, StorageError, ViewstoreError
from viewstore.importers.export import server_meta, stored_base_state, write_conversation_folder
from viewstore.importers.openhands import (
    ConversationFolder,
    find_conversation_folders,
    read_base_state,
    read_events,
)


@dataclass
class Imported:
    folder: ConversationFolder
    events: int = 0
    appended: int = 0
    duplicates: int = 0
    base_state: bool = False  # its base_state.json was stored
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.folder.conversation_id,
            "path": str(self.folder.path),
            "events": self.events,
            "appended": self.appended,
            "duplicates": self.duplicates,
            "base_state": self.base_state,
            "error": self.error,
        }


def _import_one(state: Context, folder: ConversationFolder) -> Imported:
    result = Imported(folder)
    try:
        events = read_events(folder, max_bytes=state.store.max_event_bytes)
        base_state = read_base_state(folder)
    except ImportFileError as error:
        result.error = f"{error.path}: {error.reason}"
        return result
    result.events = len(events)
    try:
        appended = state.store.append(folder.conversation_id, events)
    except StorageError:
        raise  # the database itself failed: stop everything
    except ViewstoreError as error:
        result.error = f"{folder.path}: {' '.join(str(error).split())}"
        return result
    result.appended = len(appended.appended)
    result.duplicates = len(appended.duplicates)
    if base_state is not None:
        result.base_state = _import_base_state(state, folder, base_state, len(events))
    return result


def _import_base_state(state: Context, folder: ConversationFolder, text: str, count: int) -> bool:
    """Store the folder's base state, describing its ``count`` events: skipped when the store
    already holds it, or when the conversation has grown past the folder in the store (the
    stored base state is then the newer one)."""
    stored = state.store.base_state(folder.conversation_id)
    if stored is not None and stored.payload == text and stored.at_version == count:
        return True
    try:
        state.store.save_base_state(folder.conversation_id, text, at_version=count)
    except ConcurrencyError:
        return False
    return True


@cli.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option
@pass_state
def import_(state: Context, paths: tuple[Path, ...], as_json: bool) -> None:
    """Import OpenHands conversation folders (or parent folders holding many).

    Each conversation is read completely, then appended in one transaction: a bad file means
    nothing of that conversation is imported. Events already stored are skipped, so running
    an import again is a no-op.
    """
    try:
        folders = find_conversation_folders(paths)
    except ImportFileError as error:
        raise UserError(f"{error.path}: {error.reason}") from error
    state.create_if_new()
    results: list[Imported] = []
    from rich.progress import Progress  # noqa: PLC0415 - start-up time

    with Progress(console=state.err, disable=not state.err.is_terminal) as progress:
        task = progress.add_task("importing", total=len(folders))
        for folder in folders:
            progress.update(task, description=f"importing {folder.conversation_id[:12]}")
            results.append(_import_one(state, folder))
            progress.advance(task)
    failed = [r for r in results if r.error is not None]
    if as_json:
        state.print_json({"conversations": [r.to_dict() for r in results]})
    else:
        table = new_table("import")
        for column in ("conversation", "events", "appended", "already stored", "status"):
            table.add_column(
                column,
                justify="left" if column in ("conversation", "status") else "right",
                no_wrap=column == "conversation",  # an id is copied whole
            )
        for r in results:
            table.add_row(
                printable(r.folder.conversation_id),
                str(r.events),
                str(r.appended),
                str(r.duplicates),
                "ok" if r.error is None else "[red]failed: nothing imported[/]",
            )
        print_table(state.out, table)
    for r in failed:
        click.echo(f"error: {printable(r.error or '')}", err=True)
    if failed:
        sys.exit(EXIT_USAGE)


@cli.command()
@click.argument("conversation")
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--jsonl",
    is_flag=True,
    help="Write one event per line to the file OUT (- for stdout) instead of a folder.",
)
@click.option("--force", is_flag=True, help="Overwrite an existing non-empty conversation folder.")
@click.option(
    "--agent-server",
    "for_server",
    is_flag=True,
    help="Also write meta.json, so that an openhands-agent-server whose conversations_path "
    "is OUT lists and runs the conversation.",
)
@json_option
@pass_state
def export(  # noqa: PLR0917 (click passes the options positionally by name)
    state: Context,
    conversation: str,
    out: Path,
    jsonl: bool,
    force: bool,
    for_server: bool,
    as_json: bool,
) -> None:
    """Write a conversation back as an OpenHands folder OUT/<conversation>/ (or JSONL)."""
    if jsonl and for_server:
        raise UserError("--agent-server writes a folder: it cannot go with --jsonl")
    stored = state.store.events(conversation)
    if jsonl:
        text = "".join(event.payload_json + "\n" for event in stored)
        if str(out) == "-":
            sys.stdout.write(text)
            return
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as error:
            raise UserError(f"{out}: cannot write: {error.strerror or error}") from error
        if as_json:  # the same summary as a folder export (stdout: the events themselves)
            key = stored[0].conversation_id if stored else conversation
            state.print_json({"conversation_id": key, "events": len(stored), "path": str(out)})
        else:
            state.err.print(f"wrote {len(stored)} events to {out}")
        return
    key = stored[0].conversation_id if stored else conversation
    kept = state.store.base_state(key)
    base_state = (
        None if kept is None else stored_base_state(key, stored, kept.payload, kept.at_version)
    )
    meta = None
    if for_server:
        row = state.store.server_conversation(key)
        meta = server_meta(key, None if row is None else row.meta, base_state)
        if meta is None:
            raise UserError(
                f"conversation {key!r} has no base state with a workspace: an agent server "
                "could not run it"
            )
    try:
        target = write_conversation_folder(
            out, key, stored, overwrite=force, base_state=base_state, meta=meta
        )
    except ImportFileError as error:
        raise UserError(f"{error.path}: {error.reason}") from error
    except OSError as error:
        raise UserError(f"{out}: cannot write: {error.strerror or error}") from error
    if as_json:
        state.print_json(
            {"conversation_id": target.name, "events": len(stored), "path": str(target)}
        )
    else:
        state.out.print(f"wrote {len(stored)} events to {target}")
