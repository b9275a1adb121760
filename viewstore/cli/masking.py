"""Masking rules (docs/masking.md): ``viewstore masking show`` checks a rules file and prints
it, ``try`` shows what it would mask in events without storing them, ``list`` what masking
changed in a stored conversation. Appends mask by the rules ``viewstore --masking FILE`` gives."""

from __future__ import annotations

from pathlib import Path
from typing import IO

import click

from viewstore.cli.app import Context, UserError, cli, json_option, pass_state
from viewstore.cli.commands import _read_jsonl

_RULES = click.argument("rules_file", metavar="RULES", type=click.Path(path_type=Path))


@cli.group()
def masking() -> None:
    """Masking rules: check a rules file, try it on events, list what an append masked."""


@masking.command()
@_RULES
@json_option
@pass_state
def show(state: Context, rules_file: Path, as_json: bool) -> None:
    """Check a rules file and print its rules, one line each."""
    from viewstore import MaskingRules  # noqa: PLC0415 - start-up time

    rules = MaskingRules.from_file(rules_file)
    if as_json:
        state.print_json(rules.to_dict())
        return
    for rule in rules.to_dict()["rules"]:
        where = ", ".join(rule.get("paths", ["every content string"]))
        kinds = ", ".join(rule.get("kinds", ["every kind"]))
        state.out.print(f"{rule['name']}: {rule['pattern']}  ({where}; {kinds})", markup=False)


@masking.command("try")
@_RULES
@click.argument("file", type=click.File("r", encoding="utf-8"))
@json_option
@pass_state
def try_(state: Context, rules_file: Path, file: IO[str], as_json: bool) -> None:
    """Show what the rules would mask in FILE's events (JSONL, - for stdin); store nothing."""
    from viewstore import MaskingRules  # noqa: PLC0415 - start-up time
    from viewstore.store import DEFAULT_MAX_EVENT_BYTES  # noqa: PLC0415 - start-up time

    rules = MaskingRules.from_file(rules_file)
    name = getattr(file, "name", "<stdin>")
    try:
        events, _lines = _read_jsonl(file, name, DEFAULT_MAX_EVENT_BYTES)
    except UnicodeDecodeError as error:
        raise UserError(f"{name}: not valid UTF-8 ({error.reason})") from error
    found = []
    for event in events:
        masked, items = rules.mask(event)
        found.append((event, masked, items))
    if as_json:
        state.print_json(
            [
                {"id": e.id, "masked": [m.to_dict() for m in items], "payload": after.payload}
                for e, after, items in found
            ]
        )
        return
    for event, _after, items in found:
        shown = "; ".join(f"{m.path} {m.rule} x{m.count}" for m in items) or "nothing to mask"
        state.out.print(f"{event.id}: {shown}", markup=False)


@masking.command("list")
@click.argument("conversation")
@json_option
@pass_state
def list_(state: Context, conversation: str, as_json: bool) -> None:
    """What masking changed in a stored conversation's events, by seq."""
    records = state.store.masks(conversation)
    if as_json:
        state.print_json([record.to_dict() for record in records])
        return
    if not records:
        state.out.print(f"nothing in {conversation} was masked", markup=False)
    for record in records:
        shown = "; ".join(f"{m.path} {m.rule} x{m.count}" for m in record.masked)
        state.out.print(f"seq {record.seq} {record.event_id}: {shown}", markup=False)
