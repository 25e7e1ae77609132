"""`drafters`: a thin command line over registry/, verifier/ and dashboard/ (torch only where a command needs it).

Commands live in one module per area; importing them registers them on `app`.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

from drafters.cli import api_cli, launching, lookup, planning, pricing, servers, serving, verifying, watching  # noqa: F401 - registers the commands
from drafters.cli import render
from drafters.cli.common import app
from registry.errors import DraftersError


def _fail(message: str, code: int) -> None:
    """One line on stderr, then the exit status: what scripts and cron jobs read."""
    render.error_console.print(f"[red]error:[/] {render.plain(message)}", soft_wrap=True, highlight=False)
    sys.exit(code)


def main() -> None:
    # Warnings reach the user through the commands' own output; DRAFTERS_LOG_LEVEL=INFO shows the details.
    logging.basicConfig(level=os.environ.get("DRAFTERS_LOG_LEVEL", "ERROR").upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", force=True)
    try:
        # Non-standalone mode hands back typer.Exit's code (and a command's return value) instead of exiting.
        result = app(standalone_mode=False)
    except DraftersError as exc:  # every layer's errors for the user: one line, the status the error carries
        message = exc.args[0] if exc.args else str(exc)
        _fail(str(message), exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Exception as exc:  # usage errors arrive here in non-standalone mode
        # Typer ships its own copy of click, so its ClickException is recognised by what it can do.
        if callable(getattr(exc, "show", None)) and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("DRAFTERS_LOG_LEVEL", "").upper() == "DEBUG":
            raise
        # Anything unforeseen is still one line; DRAFTERS_LOG_LEVEL=DEBUG shows the traceback.
        _fail(f"{type(exc).__name__}: {exc} (DRAFTERS_LOG_LEVEL=DEBUG shows the traceback)", 1)
    sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)
