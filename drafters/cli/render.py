"""Rendering for the CLI: Rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from registry.domain.json_shapes import json_default, jsonable, versioned

console = Console()
error_console = Console(stderr=True)


_default = json_default


def to_jsonable(value: Any) -> Any:
    return jsonable(value)


def print_json(value: Any) -> None:
    """Every `--json` body, versioned the one way (registry/domain/json_shapes.py, docs/api.md)."""
    sys.stdout.write(json.dumps(versioned(jsonable(value)), indent=2, sort_keys=False) + "\n")


# Whole escape sequences first, so that no `[2J` or `]0;title` is left behind as text: CSI (ESC [ or 0x9B, up to
# its final byte), OSC, DCS, SOS, PM and APC strings (up to BEL or ST, or to the end), and two-byte ESC sequences.
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
)
# Then every C0 and C1 control character (BEL, BS, CR, DEL ...) and the bidirectional controls (U+202A-202E
# embeddings and overrides, U+2066-2069 isolates, U+200E/200F/061C marks), which reorder what is shown around
# them: outside text must never move the cursor, clear the screen, retitle the terminal or read backwards.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
EMPTY = "-"


def strip_control(text: str, replacement: str = " ") -> str:
    """The one sanitizer of outside text for the terminal: escape sequences removed, control and bidi
    characters replaced by `replacement`."""
    return _CONTROL.sub(replacement, _ESCAPE.sub("", text))


def plain(text: object) -> str:
    """Text from outside (Hub configs, repo ids, error messages) made safe to print with markup on: one line,
    no control characters, Rich markup escaped."""
    return escape(strip_control(str(text)))


def cell(value: Any) -> Text:
    """A table cell: a dash for nothing, Rich Text as it is (styled on purpose), anything else literally."""
    if isinstance(value, Text):
        return value
    if value is None or value == "":
        return Text(EMPTY)
    return Text(strip_control(str(value)))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
          no_wrap: Sequence[str] = (), drop_empty: Sequence[str] = ()) -> None:
    """A table that never breaks a word (a repo id, a date, a number) across lines, at any terminal width.

    Columns named in `drop_empty` are left out when no row fills them. Each column is at least as wide as its
    longest word (a `no_wrap` column: its longest cell), so only prose wraps, at spaces; when even that does not
    fit the terminal, each row is printed as its first cell and the others as labelled fields under it."""
    cells = [[cell(value) for value in row] for row in rows]
    keep = [i for i, name in enumerate(columns)
            if name not in drop_empty or any(row[i].plain not in ("", EMPTY) for row in cells)]
    names = [columns[i] for i in keep]
    cells = [[row[i] for i in keep] for row in cells]
    widths = _column_widths(names, cells, no_wrap, console.width)
    if widths is None:
        _stacked(title, names, cells)
        return
    out = Table(title=None if title is None else plain(title), show_lines=False)
    for name, width in zip(names, widths):
        out.add_column(name, overflow="fold", width=width)
    for row in cells:
        out.add_row(*row)
    console.print(out)


def fits(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> bool:
    """Whether `table` would print these as a table at this terminal's width, no word broken."""
    return _column_widths(columns, [[cell(value) for value in row] for row in rows], (), console.width) is not None


def _column_widths(names: Sequence[str], cells: Sequence[Sequence[Text]], no_wrap: Sequence[str],
                   width: int) -> list[int] | None:
    """Widths (without padding) at which no word breaks, filling `width`; None when the longest words do not fit."""
    def words(text: str) -> list[str]:
        return text.split() or [""]

    lows, highs = [], []
    for i, name in enumerate(names):
        texts = [name, *(row[i].plain for row in cells)]
        lines = [line for text in texts for line in text.splitlines() or [""]]
        high = max(cell_len(line) for line in lines)
        low = high if name in no_wrap else max(cell_len(w) for line in lines for w in words(line))
        lows.append(max(low, 1))
        highs.append(max(high, 1))
    room = width - (3 * len(names) + 1)  # a space either side of each cell and the box's vertical lines
    if sum(highs) <= room:
        return highs
    if sum(lows) > room:
        return None
    # What is left over makes the columns that lack least whole first, so only the longest text wraps.
    widths, spare = list(lows), room - sum(lows)
    for i in sorted(range(len(names)), key=lambda i: highs[i] - lows[i]):
        grant = min(highs[i] - lows[i], spare)
        widths[i] += grant
        spare -= grant
    return widths


def _stacked(title: str | None, names: Sequence[str], cells: Sequence[Sequence[Text]]) -> None:
    """Each row as its first cell, then `name: value` fields packed into lines under it (for a narrow terminal)."""
    if title is not None:
        console.print(plain(title), style="bold")
    room = max(console.width - 4, 20)
    for row in cells:
        console.print(Text(row[0].plain, style="bold") if not row[0].style else row[0])
        line = Text()
        for name, value in zip(names[1:], row[1:]):
            field = Text(f"{name}: ", style="dim").append_text(value)
            if line.plain and cell_len(line.plain) + 3 + cell_len(field.plain) > room:
                console.print(Padding(line, (0, 0, 0, 4), expand=False))
                line = Text()
            line = line.append("   ") if line.plain else line
            line.append_text(field)
        if line.plain:
            console.print(Padding(line, (0, 0, 0, 4), expand=False))


VERDICT_STYLE = {"exact": "green", "declared": "blue", "structural": "cyan", "incompatible": "red", "unknown": "yellow"}


def verdict(text: str) -> Text:
    return Text(strip_control(text), style=VERDICT_STYLE.get(text, "white"))


def styled(markup: str, *values: object) -> Text:
    """Markup written here with outside values filled in literally: styled("[red]failed:[/] {}", reason)."""
    return Text.from_markup(markup.format(*(plain(v) for v in values)))
