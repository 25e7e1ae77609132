"""`drafters plan` (every exact pair and what this machine's worker does about it, with the reason) and
`drafters fetch` (one repo at a pinned sha into the service's downloads, with a progress bar)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TransferSpeedColumn
from rich.text import Text

from drafters.cli import render
from drafters.cli.common import Failed, JsonOption, app, checked_ref, open_store
from registry.domain import plan
from registry.domain.memory import binary_size
from registry.hub import HubClient
from registry.hub.download import Downloader
from registry.settings import get_settings
from verifier import autoverify

STATE_STYLE = {plan.MEASURED: "green", plan.RUNNING: "cyan", plan.DOWNLOADING: "cyan", plan.QUEUED: "cyan",
               plan.READY: "white", plan.FAILED: "red", plan.NEEDS_MEMORY: "yellow", plan.NEEDS_DISK: "yellow",
               plan.GATED: "magenta", plan.NO_ENGINE: "yellow", plan.LICENSE: "magenta", plan.GONE: "red",
               plan.UNKNOWN: "yellow"}


@app.command("plan")
def plan_command(
    as_json: JsonOption = False,
    structural: Annotated[bool | None, typer.Option(
        "--structural/--exact-only", help="Include structural pairs (default: DRAFTERS_AUTOVERIFY_STRUCTURAL).")] = None,
) -> None:
    """Every exact pair, newest releases first then the catalog backlog, and what this machine's worker does about
    it: measured / queued / downloading / needs N GiB / gated / no engine — always with the reason."""
    settings = get_settings()
    worker = autoverify.capability(settings, "plan")
    rows = autoverify.make_plan(open_store(), worker,
                                structural=settings.autoverify_structural if structural is None else structural)
    if as_json:
        render.print_json({
            "worker": {"device": worker.device, "memory_bytes": worker.memory_bytes, "engines": dict(worker.engines),
                       "disk_budget_bytes": worker.disk_budget_bytes, "autoverify": settings.autoverify},
            "counts": plan.counts(rows),
            "pairs": [row.to_json() for row in rows],
        })
        return
    render.console.print(render.plain(
        f"worker: {worker.device}, {binary_size(worker.memory_bytes)} memory, engines "
        f"{', '.join(f'{k} ({v})' for k, v in worker.engines.items()) or 'none (pip install the verifier extra)'}, "
        f"download budget {binary_size(worker.disk_budget_bytes)}" + ("" if settings.autoverify else
                                                                 "; autoverify is off (DRAFTERS_AUTOVERIFY=0)")),
        markup=False, highlight=False)
    if not rows:
        render.console.print("no exact pairs recorded yet (`drafters catalog load`, `drafters watch`)")
        return
    render.table(None, ["state", "drafter", "target", "reason"], [
        (Text(row.state, style=STATE_STYLE.get(row.state, "white")), row.drafter, row.target,
         row.reason + (" (link below)" if row.link else ""))
        for row in rows
    ], no_wrap=["state"])
    links = list(dict.fromkeys(row.link for row in rows if row.link))
    if links:
        # One per line and never wrapped, so that a terminal can open each.
        render.console.print("where to ask for access (then set HF_TOKEN):")
        for link in links:
            render.console.print(render.strip_control(link), soft_wrap=True, markup=False, highlight=False)
    render.console.print(render.plain(", ".join(f"{n} {state}" for state, n in plan.counts(rows).items())),
                         markup=False, highlight=False)


@app.command("fetch")
def fetch_command(
    repo: str,
    revision: Annotated[str, typer.Option(help="The commit sha (40 hex digits) to download.")],
) -> None:
    """Download a repo's config, tokenizer and safetensors files at a commit into the service's downloads (the
    same ledger, budget and eviction as autoverify), with a progress bar."""
    repo, revision = checked_ref(repo, "repo"), checked_ref(revision, "revision")
    settings = get_settings()
    client = HubClient(settings.hub_endpoint, settings.token_value(), settings.hub_cache_dir,
                       timeout=max(settings.hub_timeout_s, 60.0))
    budget = autoverify.capability(settings, "fetch").disk_budget_bytes
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeElapsedColumn(), console=render.error_console, transient=True) as progress:
        task = progress.add_task(render.plain(repo), total=None)

        def report(_what: str, done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            fetched = Downloader(open_store(), client, settings.downloads_dir, budget, on_progress=report).fetch(
                repo, revision)
        except ValueError as error:  # a DownloadFailed is a Failed already
            raise Failed(str(error)) from error
    render.console.print(render.plain(f"{fetched.path} ({binary_size(fetched.bytes)} downloaded in "
                                      f"{fetched.seconds:.1f} s)"), markup=False, highlight=False)
