"""`drafters`: a thin command line over registry/, verifier/ and dashboard/ (torch only where a command needs it).

Commands live in one module per area; importing a module registers its commands on `app`. `main` imports only the
module of the command asked for, so `drafters find …` does not load the API server or the watcher, and
`drafters --help` prints the overview below without importing any of them (it starts in a fraction of a second).
`load_commands()` imports them all (the in-process test runner, `COMMANDS`' test).
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import sys
import textwrap

import typer

from drafters.cli import render
from registry.errors import DraftersError

# Every command by area, in the order a new user meets them: (name, module, one line). tests/registry/test_cli.py
# checks the table against the commands the modules register and their docstrings' first lines.
COMMANDS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    ("Find and check drafters", (
        ("find", "drafters.cli.lookup", "Every drafter that fits a checkpoint, with its verdict, reasons and lag."),
        ("check", "drafters.cli.lookup", "The verdict for one pair; each side is a repo id the registry knows or a "
                                         "local folder with config.json."),
        ("launch", "drafters.cli.launching", "The exact serving command for each exact pair of TARGET, with the draft "
                                             "length its measured runs favour."),
        ("lag", "drafters.cli.lookup", "Drafter lag per target, worst first: days from the target's release to its "
                                       "first exact drafter."),
        ("price", "drafters.cli.pricing", "Predicted tok/s without and with the drafter on each GPU class, from the "
                                          "pair's measured acceptance."),
    )),
    ("Run the service", (
        ("up", "drafters.cli.up", "The main job: upgrade the database, load the catalog, then watch, deliver "
                                       "alerts, verify and serve."),
        ("status", "drafters.cli.watching", "What each part of `drafters up` is doing, when it last succeeded and its "
                                            "last error; the watcher's orgs and quarantined repos."),
        ("dashboard", "drafters.cli.up", "Serve the Streamlit dashboard (read-only) on 127.0.0.1."),
        ("serve", "drafters.cli.serve", "The registry as a read-only HTTP JSON API (OpenAPI at /openapi.json)."),
        ("plan", "drafters.cli.planning", "Every exact pair and what this machine's worker does about it."),
        ("demo", "drafters.cli.up", "Build the tiny demo pairs and measure them."),
    )),
    ("Measure", (
        ("verify", "drafters.cli.verifying", "Run real speculative decoding for one (target, drafter) pair: lossless "
                                             "check, τ, speedup, memory."),
        ("compare", "drafters.cli.verifying", "The priced comparison: several drafters (or engines) on one target."),
        ("runs", "drafters.cli.verifying", "Stored benchmark runs, newest first."),
        ("doctor", "drafters.cli.servers", "Is speculation really on? Probe a running server and compare it with what "
                                           "the registry knows of the pair."),
        ("sweep", "drafters.cli.servers", "The speedup at each concurrency: both servers under the same closed-loop "
                                          "load, the crossover where the drafter stops paying, stored as one curve."),
        ("ingest", "drafters.cli.verifying", "Record a run from a server you already run (its speculative counters "
                                             "since boot), beside everyone else's."),
        ("worker", "drafters.cli.verifying", "Claim queued verification jobs and run them."),
        ("gguf", "drafters.cli.verifying", "Convert a target and its drafter to GGUF with llama.cpp's own converter."),
        ("convert-hf-to-gguf", "drafters.cli.verifying", "Run llama.cpp's convert_hf_to_gguf.py of the installed llamacpp "
                                                         "extra's build with these arguments (what `launch` prints)."),
        ("fetch", "drafters.cli.planning", "Download a repo's config, tokenizer and safetensors files at a commit."),
    )),
    ("Watch and alert", (
        ("watch", "drafters.cli.watching", "Watch the Hub for new checkpoints, upgrades, in-place weight changes and "
                                           "drafter releases."),
        ("alerts", "drafters.cli.watching", "Events the watcher recorded."),
        ("subscribe", "drafters.cli.watching", "Deliver matching events to a webhook (Slack-compatible JSON, Standard "
                                               "Webhooks signature)."),
        ("subscriptions", "drafters.cli.watching", "Webhook subscriptions (URLs masked: a webhook URL can be a "
                                                   "credential)."),
        ("unsubscribe", "drafters.cli.watching", "Stop delivering alerts to a subscription."),
        ("deliver", "drafters.cli.watching", "Send pending webhook deliveries now (the long-running service does this "
                                             "on its own)."),
        ("feed", "drafters.cli.watching", "Write the Atom feed of events (default: $DRAFTERS_HOME/feed.atom)."),
        ("hub-webhooks", "drafters.cli.watching", "The Hub webhook that watches every watched org, so that polling is "
                                                  "the safety net."),
        ("push-server", "drafters.cli.serve", "Accept Hub webhook calls and read the named repo right away."),
    )),
    ("The database and the catalog", (
        ("db", "drafters.cli.lookup", "The database: upgrade the schema, create a read-only role."),
        ("catalog", "drafters.cli.lookup", "The bundled catalog: load it, its coverage by engine, its coverage of "
                                           "each public drafter list."),
    )),
)
MODULES: dict[str, str] = {name: module for _, rows in COMMANDS for name, module, _ in rows}


def load_commands(modules: tuple[str, ...] = ()) -> None:
    """Import the command modules named (all of them when none), which registers their commands."""
    for module in modules or tuple(dict.fromkeys(MODULES.values())):
        importlib.import_module(module)  # the names are the literals of COMMANDS


def overview(columns: int | None = None) -> str:
    """`drafters --help`: every command by area, written from COMMANDS, no command module imported; wrapped to the
    terminal (at most 100 columns)."""
    columns = min(columns or shutil.get_terminal_size((100, 24)).columns, 100)
    width = max(len(name) for _, rows in COMMANDS for name, _, _ in rows) + 4
    lines = ["Usage: drafters COMMAND [OPTIONS] [ARGS]...", ""]
    lines += textwrap.wrap("Which speculative-decoding drafters exist for your model, whether they fit, how much they "
                           "speed it up, and when an upgrade left you without one. `drafters COMMAND --help` tells "
                           "more about each.", columns) + [""]
    for area, rows in COMMANDS:
        lines.append(f"{area}:")
        for name, _, summary in rows:
            lines += textwrap.wrap(summary, columns, initial_indent=f"  {name:<{width - 2}}",
                                   subsequent_indent=" " * width, break_on_hyphens=False)
        lines.append("")
    return "\n".join(lines)


def _fail(message: str, code: int) -> None:
    """One line on stderr, then the exit status: what scripts and cron jobs read."""
    render.error_console.print(f"[red]error:[/] {render.plain(message)}", soft_wrap=True, highlight=False)
    sys.exit(code)


def main() -> None:
    arguments = sys.argv[1:]
    if not arguments or arguments[0] in ("--help", "-h"):
        print(overview())
        sys.exit(0)
    # The asked command's module; an unknown word loads them all, so the usage error can suggest the nearest one.
    module = MODULES.get(arguments[0])
    load_commands((module,) if module else ())
    command = importlib.import_module("drafters.cli.common").command()  # the app, with the commands loaded above

    # Warnings reach the user through the commands' own output; DRAFTERS_LOG_LEVEL=INFO shows the details.
    logging.basicConfig(level=os.environ.get("DRAFTERS_LOG_LEVEL", "ERROR").upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", force=True)
    try:
        # Non-standalone mode hands back typer.Exit's code (and a command's return value) instead of exiting.
        result = command(standalone_mode=False, prog_name="drafters")
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
