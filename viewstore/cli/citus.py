"""``viewstore citus distribute``: distribute a store over a Citus cluster."""

from __future__ import annotations

import click

from viewstore.cli.app import Context, cli, json_option, pass_state


@cli.group()
def citus() -> None:
    """Run a store on a Citus cluster (see docs/distribution.md)."""


@citus.command()
@click.option("--print", "dry_run", is_flag=True, help="Print the statements; run nothing.")
@json_option
@pass_state
def distribute(state: Context, dry_run: bool, as_json: bool) -> None:
    """Distribute every table by conversation and co-locate them (on the coordinator)."""
    done = state.store.citus_distribute(dry_run=dry_run)
    if as_json:
        state.print_json({"ran": not dry_run, "statements": done})
        return
    for statement in done:
        state.out.print(f"{statement};", markup=False, soft_wrap=True)
    if not dry_run:
        state.err.print(f"distributed: {len(done)} statements ran")
