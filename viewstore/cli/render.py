"""Rich tables for views and events, the catalogue's lines, and the one-line previews they
show. Every table fits ``LINE_WIDTH`` columns (a wider terminal's width) without cutting an
id: the preview gets what the other columns leave."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.table import Table

from viewstore.store import ConversationInfo, StoredEvent, StoredView

PREVIEW_CHARS = 60
#: What a table fits when the terminal is narrower or unknown (a pipe, a file): wide enough
#: for a 36-character id beside the other columns, narrow enough for a split screen.
LINE_WIDTH = 100
#: Two spaces between columns and none at the edges: borders would take the preview's room.
GAP = 2
BLANK = "-"


def moment(value: datetime) -> str:
    """A time as the tables show it: UTC, to the second, with its zone (``Z``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def width_for(console: Console) -> int:
    """The width a table fits: ``LINE_WIDTH``, or the console's if it is wider (a terminal,
    or ``COLUMNS``)."""
    return max(LINE_WIDTH, console.width)


def new_table(title: str) -> Table:
    """A table in the CLI's style: a bold header, no borders, ``GAP`` between columns."""
    return Table(title=title, title_justify="left", box=None, pad_edge=False, padding=(0, GAP // 2))


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
    """The cells' width of the first ``columns`` columns, whole, plus the space between all
    the table's columns (``new_table``'s style)."""
    widths = [
        max(
            [cell_len(str(column.header)), column.min_width or 0]
            + [cell_len(str(cell)) for cell in column.cells]
        )
        for column in table.columns[:columns]
    ]
    return sum(widths) + GAP * (len(table.columns) - 1)


def _fit_last_column(console: Console, table: Table) -> None:
    """Give the last (preview) column what the other columns leave of the width."""
    fixed = _natural_widths(table, len(table.columns) - 1)
    table.columns[-1].max_width = max(PREVIEW_MIN, width_for(console) - fixed)


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` in ``width_for(console)`` columns, without ever cutting an id: if the
    columns other than the preview need more, the table is printed wider (a terminal wraps
    the lines) rather than shortening a value someone will copy."""
    last = table.columns[-1]
    if last.max_width is not None:
        needed = _natural_widths(table, len(table.columns) - 1) + PREVIEW_MIN
    else:
        needed = _natural_widths(table, len(table.columns))
    needed = max(needed, width_for(console))
    if needed == console.width:
        console.print(table)
        return
    # Console.print(width=) never goes beyond the console's own width: a twin writes it,
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
    table = new_table(title)
    table.add_column("cut", justify="right", style="bold green", no_wrap=True, min_width=4)
    table.add_column("pos", justify="right", no_wrap=True, min_width=3)
    table.add_column("kind", no_wrap=True)
    table.add_column("id", no_wrap=True, style="dim")
    table.add_column("preview", overflow="ellipsis", no_wrap=True)
    # From the ids and payload texts: no Event is built (nor the events model imported).
    payloads = [json.loads(text) for text in view.payloads]
    rows = [
        [
            _marker(console, position) if position in indices else "",
            str(position),
            str(payload.get("kind", "")),
            event_id,
            preview(payload),
        ]
        for position, (event_id, payload) in enumerate(zip(view.event_ids, payloads, strict=True))
    ]
    end = len(payloads)
    rows.append([_marker(console, end) if end in indices else "", "", "(end of view)", "", ""])
    for row in rows:
        table.add_row(*row)
    _fit_last_column(console, table)
    table.caption = (
        f"version {view.version} · {end} events in view · manipulation indices "
        f"{view.manipulation_indices} · unhandled condensation request: "
        f"{'yes' if view.unhandled_condensation_request else 'no'}"
    )
    table.caption_justify = "left"
    return table


def events_table(console: Console, events: Sequence[StoredEvent], *, title: str) -> Table:
    table = new_table(title)
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
    _fit_last_column(console, table)
    return table


def _plain(text: str) -> str:
    """``text`` with control characters escaped: an agent server's title or status reaches a
    terminal, where an escape sequence would act rather than show."""
    return (
        "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or 0x7F <= ord(c) < 0xA0 else c for c in text)
        .encode("utf-8", "backslashreplace")
        .decode("utf-8")
    )


def _cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, ending in "…" if it was longer."""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, max(width - 1, 0)).rstrip() + "…"


#: The catalogue's columns: (header, right-aligned).
_CATALOGUE = (
    ("id", False),
    ("last activity", False),
    ("events", True),
    ("view", True),
    ("server", False),
    ("status", False),
)
#: The second line of a conversation starts this far in, under its id.
_INDENT = "  "


def catalogue_lines(records: Sequence[ConversationInfo], width: int) -> list[str]:
    """The catalogue as text: a header, then two lines per conversation, the first with its
    id, last activity, events, live view length, agent server and status ("-" where none
    said), the second its title (``display_title``; a condensation request waiting first)
    with the whole width to itself. A line is wider than ``width`` only for an id that is."""
    rows = [
        [
            r.id,
            moment(r.updated_at),
            str(r.version),
            str(r.view_length),
            _plain(r.agent_server or BLANK),
            _plain(r.execution_status or BLANK),
        ]
        for r in records
    ]
    widths = [
        max([cell_len(header)] + [cell_len(row[i]) for row in rows])
        for i, (header, _) in enumerate(_CATALOGUE)
    ]
    # An agent server's word for a status may be long; it gives way before the line grows.
    over = sum(widths) + GAP * (len(widths) - 1) - width
    if over > 0:
        widths[-1] = max(cell_len("status"), widths[-1] - over)

    def line(cells: Sequence[str]) -> str:
        out = []
        for i, (cell, size, (_, right)) in enumerate(zip(cells, widths, _CATALOGUE, strict=True)):
            text = cell if i == 0 else _cut(cell, size)  # an id is never cut
            pad = " " * max(size - cell_len(text), 0)
            out.append(pad + text if right else text + pad)
        return (" " * GAP).join(out).rstrip()

    lines = [line([header for header, _ in _CATALOGUE])]
    for record, row in zip(records, rows, strict=True):
        lines.append(line(row))
        about = record.display_title or BLANK
        if record.unhandled_condensation_request:
            about = f"[condensation requested] {about}"
        lines.append(_INDENT + _cut(_plain(" ".join(about.split())), width - len(_INDENT)))
    return lines
