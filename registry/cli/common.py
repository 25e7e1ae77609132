"""The `drafters` application object and what every command module shares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from registry.settings import get_settings
from registry.store import Store

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Speculative-decoding drafters: what exists, what fits, how long it took.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
catalog_app = typer.Typer(no_args_is_help=True, help="The bundled drafter catalog.")
app.add_typer(db_app, name="db")
app.add_typer(catalog_app, name="catalog")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit status 2."""


def open_store() -> Store:
    return Store.open(get_settings().resolved_database_url)


def today() -> datetime:
    return datetime.now(UTC)

