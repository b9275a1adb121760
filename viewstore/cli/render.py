"""Rich tables for views and events, and the one-line previews they show."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from viewstore.events import Event
from viewstore.store import StoredEvent, StoredView

PREVIEW_CHARS = 60


def _text_of(content: Any) -> str:
    if isinstance(content, dict):
        return str(content.get("text", ""))
    if isinstance(content, list):
        return " ".join(_text_of(item) for item in content)
    return "" if content is None else str(content)


def preview(payload: dict[str, Any]) -> str:
    """A short, single-line description of an OpenHands event."""
    kind = payload.get("kind")
    text: str
    if kind == "SystemPromptEvent":
        text = _text_of(payload.get("system_prompt"))
    elif kind == "MessageEvent":
        text = _text_of((payload.get("llm_message") or {}).get("content"))
    elif kind == "ActionEvent":
        call = payload.get("tool_call") or {}
        text = f"{payload.get('tool_name', '?')}({call.get('arguments', '')})"
    elif kind in ("ObservationEvent", "UserRejectObservation"):
        observation = payload.get("observation") or {}
        text = _text_of(observation.get("content")) or str(payload.get("rejection_reason", ""))
    elif kind == "AgentErrorEvent":
        text = f"error: {payload.get('error', '')}"
    elif kind == "Condensation":
        forgotten = payload.get("forgotten_event_ids") or []
        text = f"forgets {len(forgotten)}; summary: {payload.get('summary') or '-'}"
    elif kind == "CondensationSummaryEvent":
        text = str(payload.get("summary") or "")
    elif kind == "ConversationStateUpdateEvent":
        text = f"{payload.get('key')} = {json.dumps(payload.get('value'))}"
    else:
        text = ""
    text = " ".join(text.split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return text


def _marker(console: Console, index: int) -> str:
    scissors = "✂" if (console.encoding or "").lower().startswith("utf") else ">"
    return f"{scissors} {index}"


PREVIEW_MIN = 12


def _natural_widths(table: Table, columns: int) -> int:
    """The cells' width of the first ``columns`` columns, whole, plus the borders."""
    widths = [
        max([cell_len(str(column.header))] + [cell_len(str(cell)) for cell in column.cells])
        for column in table.columns[:columns]
    ]
    return sum(widths) + 3 * len(table.columns) + 1


def _fit_last_column(console: Console, table: Table, rows: list[list[str]]) -> None:
    """Give the last (preview) column what the other columns leave of the console width."""
    fixed = _natural_widths(table, len(table.columns) - 1)
    table.columns[-1].max_width = max(PREVIEW_MIN, console.width - fixed)


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` without ever cutting an id: if the console is narrower than the
    columns other than the preview need, the table is printed wider than the console (a
    terminal wraps the lines) rather than shortening a value someone will copy."""
    last = table.columns[-1]
    if last.max_width is not None:
        needed = _natural_widths(table, len(table.columns) - 1) + PREVIEW_MIN
    else:
        needed = _natural_widths(table, len(table.columns))
    if needed <= console.width:
        console.print(table)
        return
    # Console.print(width=) never goes beyond the console's own width: a wider twin writes it,
    # of the same class, so it meets a closed pipe as the console itself would.
    wide = type(console)(
        file=console.file,
        width=needed,
        highlight=False,
        soft_wrap=console.soft_wrap,
        color_system=console.color_system,  # type: ignore[arg-type]  # a name it accepts back
        force_terminal=console.is_terminal,
    )
    wide.print(table)


def view_table(console: Console, view: StoredView, *, title: str) -> Table:
    indices = set(view.manipulation_indices)
    table = Table(title=title, title_justify="left")
    table.add_column("cut", justify="right", style="bold green", no_wrap=True, min_width=4)
    table.add_column("pos", justify="right", no_wrap=True, min_width=3)
    table.add_column("kind", no_wrap=True)
    table.add_column("id", no_wrap=True, style="dim")
    table.add_column("preview", overflow="ellipsis", no_wrap=True)
    events: Sequence[Event] = view.events
    rows = [
        [
            _marker(console, position) if position in indices else "",
            str(position),
            event.kind,
            event.id,
            preview(event.payload),
        ]
        for position, event in enumerate(events)
    ]
    end = len(events)
    rows.append([_marker(console, end) if end in indices else "", "", "(end of view)", "", ""])
    for row in rows:
        table.add_row(*row)
    _fit_last_column(console, table, rows)
    table.caption = (
        f"version {view.version} · {len(events)} events in view · manipulation indices "
        f"{view.manipulation_indices} · unhandled condensation request: "
        f"{'yes' if view.unhandled_condensation_request else 'no'}"
    )
    table.caption_justify = "left"
    return table


def events_table(console: Console, events: Sequence[StoredEvent], *, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("seq", justify="right", no_wrap=True, min_width=3)
    table.add_column("kind", no_wrap=True)
    table.add_column("id", no_wrap=True, style="dim")
    table.add_column("source", no_wrap=True)
    table.add_column("preview", overflow="ellipsis", no_wrap=True)
    rows = [
        [
            str(event.seq),
            event.kind,
            event.event_id,
            str(event.payload.get("source") or ""),
            preview(event.payload),
        ]
        for event in events
    ]
    for row in rows:
        table.add_row(*row)
    _fit_last_column(console, table, rows)
    return table
