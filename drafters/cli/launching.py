"""`drafters launch`: the exact command that serves a target with each of its launchable drafters (and the one its
checkpoint ships inside) on one engine, the recommended one first."""

from __future__ import annotations

from typing import Annotated

import typer

from drafters.cli import render
from drafters.cli.common import JsonOption, UserError, app, checked_ref, open_store
from registry.calibration.recommend import Recommendation, recommendations
from registry.domain.launch import ENGINES
from registry.store import NotFound


def launches(target: str, drafter: str | None, engine: str, gpu: str | None, *, recompute: bool) -> list[Recommendation]:
    store = open_store()
    if store.reads.get_checkpoint(target) is None:
        raise NotFound(f"{target} is not in the registry (run `drafters catalog load` or `drafters watch --once`)")
    if recompute:
        store.verdicts.recompute_compatibility(checkpoint_repo_id=target)
    results = recommendations(store, target, engine, gpu, drafter=drafter)
    if not results:
        which = f"{drafter} is not a usable drafter of" if drafter else "no drafter is a usable pair of"
        raise NotFound(f"{which} {target} (exact, or declared by its publisher or a catalog publisher): "
                       f"`drafters find {target}` lists the verdicts")
    return results


def declared_only(target: str) -> set[str]:
    """The drafters of `target` whose pair is declared but unchecked: their commands say so."""
    return {v.drafter_repo_id for v in open_store().reads.verdicts(checkpoint_repo_id=target)
            if v.verdict == "declared"}


@app.command("launch")
def launch_cli(
    target: Annotated[str, typer.Argument(help="Target repo id.")],
    engine: Annotated[str, typer.Option("--engine", help="vllm, sglang or llamacpp.")],
    drafter: Annotated[str | None, typer.Option("--drafter", help="Only this drafter (default: every exact one, the recommended first).")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU class the ranking and draft length are for (default H100 SXM).")] = None,
    as_json: JsonOption = False,
) -> None:
    """The exact serving command for each exact pair of TARGET (and the drafter it ships inside), the recommended
    one first, with the draft length the drafter was trained for or that runs on this engine and GPU favour."""
    if engine not in ENGINES:
        raise UserError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    checked_ref(target, "TARGET")
    results = launches(target, drafter, engine, gpu, recompute=True)
    if as_json:
        render.print_json({"target": target, "engine": engine,
                           "launches": [{**r.launch.as_json(), "rank": r.ranked.as_json(),
                                         "concurrency": r.concurrency.as_json()} for r in results]})
        return
    declared = declared_only(target)
    for index, result in enumerate(results):
        launch = result.launch
        first = index == 0 and drafter is None and launch.supported
        header = f"{'recommended: ' if first else ''}{launch.drafter} ({launch.method}) on {launch.engine}"
        if launch.drafter in declared:
            header += " [declared by its publisher; configs not checked: measure before relying on it]"
        render.console.print(render.strip_control(header), style="bold", markup=False, highlight=False)
        render.console.print(render.strip_control(f"  why: {result.ranked.why}"), style="dim", markup=False, highlight=False)
        if not launch.supported:
            render.console.print(render.strip_control(f"  cannot run: {launch.reason}"), style="red", markup=False,
                                 highlight=False)
            continue
        # Commands go out verbatim (soft wrap off) so that they copy and paste as they are.
        for line in launch.shell().splitlines():
            print(render.strip_control(line))
        length = launch.draft_length if launch.draft_length is not None else "the trained block / engine's choice"
        details = [f"draft length {length}: {launch.draft_length_source}",
                   f"minimum {launch.engine} version: {launch.minimum_version} ({launch.minimum_version_source})",
                   f"concurrency: {result.concurrency.text}", *launch.notes, *result.ranked.caveats]
        for line in details:
            render.console.print(render.strip_control(f"  {line}"), style="dim", markup=False, highlight=False)
