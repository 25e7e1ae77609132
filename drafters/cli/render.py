"""Rendering for the CLI: Rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
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
          no_wrap: Sequence[str] = ()) -> None:
    out = Table(title=None if title is None else plain(title), show_lines=False)
    for column in columns:
        out.add_column(column, overflow="fold", no_wrap=column in no_wrap)
    for row in rows:
        out.add_row(*[cell(value) for value in row])
    console.print(out)


VERDICT_STYLE = {"exact": "green", "declared": "blue", "structural": "cyan", "incompatible": "red", "unknown": "yellow"}


def verdict(text: str) -> Text:
    return Text(strip_control(text), style=VERDICT_STYLE.get(text, "white"))


def styled(markup: str, *values: object) -> Text:
    """Markup written here with outside values filled in literally: styled("[red]failed:[/] {}", reason)."""
    return Text.from_markup(markup.format(*(plain(v) for v in values)))
