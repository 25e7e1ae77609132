"""`drafters`: a thin command line over registry/ (and verifier/ where installed).

Commands live in one module per area; importing them registers them on `app`.
"""

from __future__ import annotations

import sys

import typer

from registry import render
from registry.cli import lookup, serving, verifying, watching  # noqa: F401 - registers the commands
from registry.cli.common import UserError, app
from registry.db import DatabaseError
from registry.local import LocalRepoError
from registry.store import NotFound

def main() -> None:
    import logging
    import os

    # Warnings reach the user through the commands' own output; DRAFTERS_LOG_LEVEL=INFO shows the details.
    logging.basicConfig(level=os.environ.get("DRAFTERS_LOG_LEVEL", "ERROR").upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", force=True)
    try:
        app(standalone_mode=False)
    except (DatabaseError, NotFound, UserError, LocalRepoError) as exc:
        message = exc.args[0] if exc.args else str(exc)
        render.error_console.print(f"[red]error:[/] {message}", soft_wrap=True, highlight=False)
        sys.exit(2 if isinstance(exc, UserError) else 1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
