"""The `drafters` application object and what every command module shares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from registry.errors import Failed, UserError
from registry.settings import get_settings
from registry.store import Store

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Speculative-decoding drafters: what exists, what fits, how long it took.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
catalog_app = typer.Typer(no_args_is_help=True, help="The bundled drafter catalog.")
app.add_typer(db_app, name="db")
app.add_typer(catalog_app, name="catalog")

__all__ = ["Failed", "UserError"]  # the errors every command raises, re-exported for them

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


# Repo ids are at most 96 characters on the Hub; paths are bounded by the file system's PATH_MAX.
MAX_REF_CHARS = 4096


def checked_ref(value: str, what: str) -> str:
    """A repo id or folder path given on the command line, refused early when it cannot be either.

    An empty string would otherwise resolve to the current directory."""
    if not value.strip():
        raise UserError(f"{what} is empty: give a repo id (org/name) or a model folder")
    if len(value) > MAX_REF_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UserError(f"{what} is not a repo id or a folder path ({len(value)} characters)")
    return value


def open_store() -> Store:
    settings = get_settings()
    settings.ensure_home()
    return Store.open(settings.resolved_database_url)


def today() -> datetime:
    return datetime.now(UTC)

