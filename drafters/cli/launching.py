"""`drafters launch`: the exact command that serves a target with each of its exact drafters on one engine."""

from __future__ import annotations

from typing import Annotated

import typer

from drafters.cli import render
from drafters.cli.common import JsonOption, UserError, app, checked_ref, open_store
from registry.calibration.launch_inputs import exact_pairs, measured_draft_length, pick_gpu
from registry.domain.launch import ENGINES, Launch, launch_command
from registry.store import NotFound


def launches(target: str, drafter: str | None, engine: str, gpu: str | None, *, recompute: bool) -> list[Launch]:
    store = open_store()
    if store.reads.get_checkpoint(target) is None:
        raise NotFound(f"{target} is not in the registry (run `drafters catalog load` or `drafters watch --once`)")
    if recompute:
        store.verdicts.recompute_compatibility(checkpoint_repo_id=target)
    chosen_gpu = pick_gpu(gpu)
    pairs = exact_pairs(store, target, drafter)
    if not pairs:
        which = f"{drafter} is not a usable drafter of" if drafter else "no drafter is a usable pair of"
        raise NotFound(f"{which} {target} (exact, or declared by its publisher or a catalog publisher): "
                       f"`drafters find {target}` lists the verdicts")
    return [launch_command(p, engine, measured_draft_length(store, p, chosen_gpu)) for p in pairs]


def declared_only(target: str) -> set[str]:
    """The drafters of `target` whose pair is declared but unchecked: their commands say so."""
    return {v.drafter_repo_id for v in open_store().reads.verdicts(checkpoint_repo_id=target)
            if v.verdict == "declared"}


@app.command("launch")
def launch_cli(
    target: Annotated[str, typer.Argument(help="Target repo id.")],
    engine: Annotated[str, typer.Option("--engine", help="vllm, sglang or llamacpp.")],
    drafter: Annotated[str | None, typer.Option("--drafter", help="Only this drafter (default: every exact one).")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU class the draft length is priced for (default H100 SXM).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The exact serving command for each exact pair of TARGET, with the draft length its measured runs favour."""
    if engine not in ENGINES:
        raise UserError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    checked_ref(target, "TARGET")
    results = launches(target, drafter, engine, gpu, recompute=True)
    if as_json:
        render.print_json({"target": target, "engine": engine, "launches": [r.as_json() for r in results]})
        return
    declared = declared_only(target)
    for result in results:
        header = f"{result.drafter} ({result.method}) on {result.engine}"
        if result.drafter in declared:
            header += " [declared by its publisher; configs not checked: measure before relying on it]"
        render.console.print(render.plain(header), style="bold", markup=False, highlight=False)
        if not result.supported:
            render.console.print(render.plain(f"  cannot run: {result.reason}"), style="red", markup=False,
                                 highlight=False)
            continue
        # Commands go out verbatim (soft wrap off) so that they copy and paste as they are.
        for line in result.shell().splitlines():
            print(render.strip_control(line))
        details = [f"draft length {result.draft_length if result.draft_length is not None else 'from the config'}: "
                   f"{result.draft_length_source}",
                   f"minimum {result.engine} version: {result.minimum_version} ({result.minimum_version_source})",
                   *result.notes]
        for line in details:
            render.console.print(render.plain(f"  {line}"), style="dim", markup=False, highlight=False)
