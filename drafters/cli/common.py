"""The `drafters` application object and what every command module shares."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, get_args

import typer
import typer.main
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from drafters.cli import render
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


def command() -> TyperGroup:
    """`app` as the command `main` runs, its options' help naming values as a terminal user reads them: a flag
    takes none (Typer prints `<bool>` beside every flag), a value its kind (`TEXT`, `INTEGER`, `PATH`, …), an argument
    its name in capitals."""
    built = typer.main.get_command(app)
    assert isinstance(built, TyperGroup)  # app has subcommands
    _name_values(built)
    return built


_VALUE_NAMES = {str: "TEXT", int: "INTEGER", float: "NUMBER", datetime: "DATETIME"}


def _name_values(command: TyperGroup | TyperCommand) -> None:
    help_option = command.get_help_option(command.context_class(command))  # made once and kept by the command
    for param in [*command.params, *([help_option] if help_option else [])]:
        if isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = "" if param.is_flag or param.count else _value_name(param)
        elif isinstance(param, TyperArgument) and param.metavar is None and param.name:
            param.metavar = param.name.upper()  # the usage line's `TARGET DRAFTER`, as click writes it
    for sub in command.commands.values() if isinstance(command, TyperGroup) else ():
        _name_values(sub)


def _value_name(option: TyperOption) -> str:
    kind = option.type_descriptor
    if kind.choices is not None:
        return "|".join(str(getattr(choice, "value", choice)) for choice in kind.choices)
    if kind.is_path or kind.is_file:
        return "PATH"
    element = get_args(kind.annotation)[0] if kind.is_list else kind.annotation
    return _VALUE_NAMES.get(element, "PATH" if element is Path else "TEXT")


def checked_ref(value: str, what: str) -> str:
    """A repo id or folder path given on the command line, refused early when it cannot be either.

    An empty string would otherwise resolve to the current directory."""
    if not value.strip():
        raise UserError(f"{what} is empty: give a repo id (org/name) or a model folder")
    if len(value) > MAX_REF_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UserError(f"{what} is not a repo id or a folder path ({len(value)} characters)")
    return value


def _role(store: Store, ref: str) -> str | None:
    """"drafter" or "target" where the registry holds `ref` as one of them only; None otherwise (a folder, unknown)."""
    drafter, checkpoint = store.reads.get_drafter(ref) is not None, store.reads.get_checkpoint(ref) is not None
    return "drafter" if drafter and not checkpoint else "target" if checkpoint and not drafter else None


def pair_order(store: Store, first: str, second: str, *, command: str, roles: tuple[str, str]) -> tuple[str, str]:
    """The two sides in the order `roles` names (check: drafter, target; verify, price, compare: target, drafter).

    Given the other way round where the registry knows both sides, they are swapped and that is said on stderr;
    two drafters or two targets are refused, naming the roles. Anything else (a folder, an unknown id) is taken
    as given."""
    found = (_role(store, first), _role(store, second))
    usage = f"`drafters {command} {roles[0].upper()} {roles[1].upper()}`"
    if found == (roles[1], roles[0]):
        render.error_console.print(render.plain(
            f"note: {first} is a {roles[1]} and {second} a {roles[0]}; read as {usage} with {roles[0]} {second} "
            f"and {roles[1]} {first}"), soft_wrap=True, highlight=False)
        return second, first
    if found[0] is not None and found[0] == found[1]:
        raise UserError(f"{usage} takes a {roles[0]} and a {roles[1]}: {first} and {second} are both {found[0]}s")
    return first, second


def open_store() -> Store:
    settings = get_settings()
    settings.ensure_home()
    return Store.open(settings.resolved_database_url)


def today() -> datetime:
    return datetime.now(UTC)

