"""Rendering for the CLI: Rich tables for people, JSON for scripts."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

console = Console()
error_console = Console(stderr=True)


def _default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def to_jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=_default))


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, default=_default, indent=2, sort_keys=False) + "\n")


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    out = Table(title=title, show_lines=False)
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*["" if cell is None else str(cell) for cell in row])
    console.print(out)


VERDICT_STYLE = {"exact": "green", "structural": "cyan", "incompatible": "red", "unknown": "yellow"}


def verdict(text: str) -> str:
    return f"[{VERDICT_STYLE.get(text, 'white')}]{text}[/]"
