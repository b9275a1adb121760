"""Retention by policy file (docs/retention.md): ``viewstore retention show`` checks and prints
a policy, ``viewstore retention run`` applies it once or, with ``--every``, again and again."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from viewstore.cli.app import Context, cli, json_option, pass_state
from viewstore.cli.lifecycle import pace_option, parse_duration
from viewstore.store import RetentionPolicy

_POLICY = click.option(
    "--policy",
    "policy_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="The policy, a TOML file (docs/retention.md).",
)


@cli.group()
def retention() -> None:
    """Apply a retention policy: compact what every view forgot, redact old content, erase
    idle conversations."""


@retention.command()
@_POLICY
@json_option
@pass_state
def show(state: Context, policy_file: Path, as_json: bool) -> None:
    """Check a policy file and print the rules it gives, default and overrides."""
    policy = RetentionPolicy.from_file(policy_file)
    if as_json:
        state.print_json(policy.to_dict())
        return
    rows = [("default", policy.default), *sorted(policy.conversations.items())]
    for scope, rules in rows:
        shown = rules.to_dict()
        kept = policy.keep_last_per_source if scope == "default" else None
        state.out.print(
            f"{scope}: compact after {shown['compact_after']}, "
            f"redact after {shown['redact_after']}, "
            f"delete idle after {shown['delete_idle_after']}"
            + ("" if kept is None else f", keep the last {kept} of each source"),
            markup=False,
        )
    for source, count in sorted(policy.sources.items()):
        state.out.print(
            f"source {source}: keep the last {'all' if count is None else count}", markup=False
        )


@retention.command()
@_POLICY
@click.option("--dry-run", is_flag=True, help="Count what would go; change nothing.")
@pace_option
@click.option(
    "--every",
    default=None,
    metavar="DURATION",
    help="Run again after this long, until stopped (a sweeper: 1h, 30m).",
)
@json_option
@pass_state
def run(
    state: Context,
    *,
    policy_file: Path,
    dry_run: bool,
    pace: float,
    every: str | None,
    as_json: bool,
) -> None:
    """Apply a retention policy to every conversation of the store.

    First the erasures: each agent server's conversations beyond its last keep_last, then each
    conversation idle for longer than its delete_idle_after (forks before their sources),
    leaving tombstones. Then compaction: the content of each
    event every view forgot, older than compact_after, becomes [compacted]. Then redaction:
    the content of every event older than redact_after, in the live view too, becomes
    [redacted], its metadata kept. The policy file
    is read again before each run. Safe to interrupt and run again; on PostgreSQL several may
    run at once."""
    period = None if every is None else parse_duration(every, "--every")
    store = state.store  # first: a missing database is the error to give
    from viewstore.cli.sweeping import log_to_stderr  # noqa: PLC0415 - start-up time
    from viewstore.store import RetentionReport  # noqa: PLC0415 - start-up time
    from viewstore.sweeper import DEFAULT_EVERY, RetentionSweeper  # noqa: PLC0415 - as above

    def show(report: RetentionReport) -> None:
        if as_json:
            state.print_json(report.to_dict())
        else:
            erase, compact, redact = (
                ("would erase", "would compact", "would redact")
                if dry_run
                else ("erased", "compacted", "redacted")
            )
            state.out.print(
                f"{erase} {len(report.erased)} conversation(s); {compact} "
                f"{report.events} event(s) of {report.compacted_conversations} "
                f"conversation(s), {report.bytes_freed} bytes; {redact} {report.redacted} "
                f"event(s) of {report.redacted_conversations} conversation(s)",
                markup=False,
            )

    every_period = period or DEFAULT_EVERY
    sweeper = RetentionSweeper(
        store, policy_file, every=every_period, pace=pace, dry_run=dry_run, on_report=show
    )
    show(sweeper.sweep())  # the first run's mistake ends the command, in one line
    if period is not None:
        log_to_stderr(logging.WARNING)  # a later run's is said, and the next run goes on
        sweeper.run(wait_first=True)
