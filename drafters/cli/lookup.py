"""Commands over the registry itself: schema, catalog, find, check, lag."""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.padding import Padding
from rich.text import Text

from drafters.cli import render
from drafters.cli.common import (JsonOption, UserError, app, catalog_app, checked_ref, db_app, open_store, pair_order,
                                 today)
from registry.calibration.concurrency import Concurrency, concurrency_for, target_curves
from registry.calibration.launch_inputs import STORED_ENGINE, pick_gpu, side_parameters
from registry.calibration.ranking import Ranked, rank
from registry.calibration.recommend import launchable_pairs
from registry.domain import hub_presence, pair
from registry.domain.compat import VERDICT_ORDER
from registry.domain.gpus import Gpu
from registry.domain.launch import ENGINES
from registry.domain.catalog import load_catalog_data
from registry.domain.coverage import coverage
from registry.domain.engines import MEASURED
from registry.domain.public_lists import coverage as list_coverage
from registry.domain.public_lists import load_public_lists
from registry.hub import HubClient
from registry.local import looks_like_folder, resolve_side
from registry.reports import LagRow, built_in_label, find_for_checkpoint, lag_by, lag_table, upgrade_table
from registry.settings import get_settings
from registry.store import Store
from registry.typed_ids import Resolved, resolve_checkpoint
from registry.store.db import current_revision, head_revision
from registry.store.roles import create_readonly_role



@db_app.command("upgrade")
def db_upgrade() -> None:
    """Bring the database schema to the newest migration."""
    store = open_store()
    render.console.print(f"database at revision {current_revision(store.engine)} (head {head_revision()})")


@db_app.command("readonly-role")
def db_readonly_role(
    name: Annotated[str, typer.Argument(help="The role to create, e.g. drafters_dashboard.")],
    password_env: Annotated[str, typer.Option("--password-env", help="Environment variable holding its password.")],
) -> None:
    """Create (or renew) a PostgreSQL role that can read the registry and write nothing, for the dashboard."""
    password = os.environ.get(password_env)
    if not password:
        raise UserError(f"environment variable {password_env} is not set or empty: put the role's password there")
    role = create_readonly_role(open_store().engine, name, password)
    render.console.print(f"role {role.name} {'created' if role.created else 'renewed'}: it can connect to "
                         f"{role.database} and read every registry table; it cannot write")


@catalog_app.command("load")
def catalog_load(as_json: JsonOption = False) -> None:
    """Load the bundled catalog; loading twice changes nothing."""
    store = open_store()
    summary = store.catalog.load_catalog()
    if as_json:
        render.print_json(summary)
        return
    render.console.print(
        f"catalog: {summary.drafters} drafters ({summary.dflash_21} of the 21 DFlash v1), "
        f"{summary.built_in} built into checkpoints, "
        f"{summary.targets} targets; {summary.verdicts} verdicts computed"
    )


@catalog_app.command("coverage")
def catalog_coverage(as_json: JsonOption = False) -> None:
    """Which bundled catalog drafters each engine (pytorch, llama.cpp) can run, by method and weight layout."""
    # A drafter built into its checkpoint is run by serving that checkpoint: nothing for an engine to pair.
    drafters = [d for d in load_catalog_data().drafters if not d.built_in]
    rows = [(d, coverage(d.method, d.config, d.repo_id)) for d in drafters]
    if as_json:
        render.print_json(
            [{"drafter": d.repo_id, "method": c.method, "layout": c.layout, "engines": list(c.engines)} for d, c in rows]
        )
        return
    marks = {True: Text("✓", style="green"), False: Text("✗", style="red")}
    render.table(
        "catalog coverage",
        ["drafter", "method", "layout", *MEASURED],
        [(d.repo_id, c.method, c.layout, *(marks[e in c.engines] for e in MEASURED)) for d, c in rows],
    )
    counts = ", ".join(f"{e} {sum(e in c.engines for _, c in rows)}/{len(rows)}" for e in MEASURED)
    render.console.print(f"runnable: {counts}; by none: {sum(not c.runnable for _, c in rows)}")


@catalog_app.command("lists")
def catalog_lists(as_json: JsonOption = False) -> None:
    """How much of each public drafter list (speculators, SpecBundle, EAGLE-3, z-lab) the bundled catalog holds."""
    rows = list_coverage(load_catalog_data(), load_public_lists())
    if as_json:
        render.print_json({"lists": rows})
        return
    for row in rows:
        line = render.styled("{} ({}): ", row.name, row.url)
        line.append(f"{row.held}/{row.total} in the catalog", style="green" if not row.missing else "yellow")
        render.console.print(line)
        for missing in row.missing:
            why = f" (left out: {missing.reason})" if missing.reason else ""
            render.console.print(Padding(render.cell(f"missing {missing.repo_id}{why}"), (0, 0, 0, 4)), style="dim")


def _hub_client() -> HubClient:
    settings = get_settings()
    return HubClient(settings.hub_endpoint, settings.token_value(), settings.hub_cache_dir,
                     timeout=settings.hub_timeout_s)


def _resolved_json(typed: str, resolved: Resolved) -> dict:
    derivation = resolved.derivation
    return {"asked": typed, "resolved_by": resolved.how,
            "derived_from": None if derivation is None else {
                "repo_id": derivation.repo_id, "relation": derivation.relation, "base": derivation.base,
                "chain": [list(hop) for hop in derivation.chain], "note": derivation.note}}


@app.command("find")
def find(
    repo_id: str,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU class the exact drafters are ranked for (default H100 SXM).")] = None,
    engine: Annotated[str | None, typer.Option("--engine", help="Rank by runs of this engine only (vllm, sglang, llamacpp).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Every drafter that fits a checkpoint, with its verdict, reasons and lag; the exact ones ranked (measured
    speedup on the GPU class, else a published τ, else by rule), each with why. REPO_ID as you have it: any case, a
    Hub URL, a bare name; a quantized or finetuned derivative is looked up on the Hub and answered for its base."""
    if engine is not None and engine not in ENGINES:
        raise UserError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    store = open_store()
    typed = checked_ref(repo_id, "the checkpoint")
    resolved = resolve_checkpoint(store, typed, _hub_client)
    checkpoint, rows = find_for_checkpoint(store, resolved.checkpoint_repo_id)
    runs = {r.drafter_repo_id: _coverage_of(store, r.drafter_repo_id, r.method) for r in rows}
    checkpoint_gone = hub_presence.gone_marker(checkpoint.status, checkpoint.status_detail)
    built_in = built_in_label(checkpoint.built_in)
    chosen = pick_gpu(gpu)
    ranks = _ranks(store, checkpoint.repo_id, chosen, engine)
    rows.sort(key=lambda r: (VERDICT_ORDER.get(r.verdict, 9), ranks[r.drafter_repo_id][0] if r.drafter_repo_id in ranks
                             else 0, r.gone is not None, r.method or "", r.drafter_repo_id))
    curves = target_curves(store, checkpoint.repo_id)
    stored_engine = STORED_ENGINE[engine] if engine is not None else None
    concurrency = {d: concurrency_for(curves.get(d, []), chosen, stored_engine)
                   for d in [checkpoint.repo_id, *(r.drafter_repo_id for r in rows)]}
    if as_json:
        drafters = [{**render.to_jsonable(r), "engines": list(runs[r.drafter_repo_id].engines),
                     "rank": _rank_json(ranks.get(r.drafter_repo_id)),
                     "concurrency": concurrency[r.drafter_repo_id].as_json()} for r in rows]
        # 2: "built_in" (methods inside the checkpoint) and each drafter's "license" and "replaced_in_place";
        # "rank" of each exact row and of the built-in drafter, "ranked_for" what they were ranked for;
        # "asked", "resolved_by", "derived_from" and each drafter's "notes"; 4: "concurrency" of each drafter and
        # "built_in_concurrency" (what measured speedup curves say at concurrency > 1).
        render.print_json({"checkpoint": checkpoint, **_resolved_json(typed, resolved),
                           "checkpoint_gone": checkpoint_gone, "built_in": list(checkpoint.built_in),
                           "built_in_rank": _rank_json(ranks.get(checkpoint.repo_id)),
                           "built_in_concurrency": concurrency[checkpoint.repo_id].as_json()
                           if checkpoint.built_in else None,
                           "ranked_for": {"gpu": chosen.name, "engine": engine},
                           "drafters": drafters})
        return
    if resolved.derivation is not None:
        render.console.print(render.styled("[yellow]{}[/]: {}", resolved.derivation.repo_id,
                                           resolved.derivation.note))
    elif resolved.how is not None:
        render.console.print(render.styled("{} is {}", typed, checkpoint.repo_id), style="dim")
    if checkpoint_gone is not None:
        render.console.print(render.styled("[yellow]{} is {}[/]", checkpoint.repo_id, checkpoint_gone))
    if built_in is not None:
        # Inside the checkpoint itself: nothing to download or pair, so it is not one of the drafter rows.
        render.console.print(render.styled("{}: ships inside {} (no separate download)", built_in, checkpoint.repo_id),
                             style="green")
        _print_rank(ranks.get(checkpoint.repo_id), chosen, engine)
        _print_concurrency(concurrency[checkpoint.repo_id])
    if not rows and built_in is not None:
        return
    if not rows:
        render.console.print(f"no drafter in the registry fits {render.plain(checkpoint.repo_id)}")
        return
    # Four short columns fit an 80-column terminal; the reasons, the long part, fold under their row.
    render.console.print(f"drafters for {render.plain(checkpoint.repo_id)}", style="bold")
    for r in rows:
        line = render.verdict(r.verdict)
        line.pad_right(13 - len(line))
        line.append(render.strip_control(f"{r.method or render.EMPTY:<16} {r.drafter_released or render.EMPTY!s:<10}  "))
        line.append(render.strip_control(r.drafter_repo_id))
        if r.gone is not None:
            line.append(f"  ({r.gone}: cannot be downloaded)", style="red")  # never shown as available
        render.console.print(line)
        details = [*([f"note: {r.notes}"] if r.notes else []), *r.reasons, f"license: {r.license or 'unknown'}",
                   *(f"replaced in place {change}" for change in r.replaced_in_place)]
        render.console.print(Padding(render.cell("; ".join(details)), (0, 0, 0, 4)), style="dim")
        _print_rank(ranks.get(r.drafter_repo_id), chosen, engine)
        if r.drafter_repo_id in ranks or concurrency[r.drafter_repo_id].curves:
            _print_concurrency(concurrency[r.drafter_repo_id])
        not_runnable = runs[r.drafter_repo_id].note()
        if not_runnable:
            render.console.print(Padding(render.cell(f"✗ {not_runnable}"), (0, 0, 0, 4)), style="red")


def _ranks(store: Store, target: str, gpu: Gpu, engine: str | None) -> dict[str, tuple[int, Ranked]]:
    """Position (from 1) and reason of each launchable drafter, the built-in one included (ranking.rank)."""
    pairs = launchable_pairs(store, target)
    target_runs = [r for r in store.runs.list_runs(target=target) if r.status == "ok"]
    records = {p.drafter: None if p.built_in else store.reads.get_drafter(p.drafter) for p in pairs}
    sha = pairs[0].target_sha if pairs else None
    ranked = rank(pairs, target_runs, gpu, engine, records=records,
                  target_parameters=side_parameters(store, target, sha))
    return {r.pair.drafter: (position, r) for position, r in enumerate(ranked, start=1)}


def _print_rank(entry: tuple[int, Ranked] | None, gpu: Gpu, engine: str | None) -> None:
    """"#2 for H100 SXM: why", and the caveats the row does not show already (the license is in its details)."""
    if entry is None:
        return
    position, ranked = entry
    caveats = [c for c in ranked.caveats if not c.startswith("license:")]
    text = f"#{position} for {gpu.name}{' on ' + engine if engine else ''}: {ranked.why}"
    render.console.print(Padding(render.cell("; ".join([text, *caveats])), (0, 0, 0, 4)), style="cyan")


def _print_concurrency(found: Concurrency) -> None:
    """"concurrency: pays up to c≈8 on H100 SXM (…)", or "not measured at concurrency > 1 on H100 SXM"."""
    render.console.print(Padding(render.cell(f"concurrency: {found.text}"), (0, 0, 0, 4)),
                         style="cyan" if found.measured else "dim")


def _rank_json(entry: tuple[int, Ranked] | None) -> dict[str, object] | None:
    return None if entry is None else {"position": entry[0], **entry[1].as_json()}


def _license_of(store: Store, value: str) -> str | None:
    """The license a registered drafter states; None for a local folder or where no source says."""
    if looks_like_folder(value):
        return None
    record = store.reads.get_drafter(value)
    return record.license if record is not None else None


def _notes_of(store: Store, value: str) -> str | None:
    """The catalog's caveat for a registered drafter ("non-thinking only"); None for a folder or where none is."""
    if looks_like_folder(value):
        return None
    record = store.reads.get_drafter(value)
    return record.notes if record is not None else None


def _coverage_of(store: Store, repo_id: str, method: str | None):
    """Which engines run this drafter, from its newest stored config (or its repo id when none is stored)."""
    head = store.reads.drafter_head_revision(repo_id)
    return coverage(method, head.config if head else None, repo_id)


def _gone_from_hub(store: Store, value: str, *, drafter: bool) -> str | None:
    """"gone from the Hub since …" when `value` is a recorded repo the watcher found deleted or made private."""
    if looks_like_folder(value):
        return None
    record = store.reads.get_drafter(value) if drafter else store.reads.get_checkpoint(value)
    if record is None:
        return None
    return hub_presence.gone_marker(record.status, record.status_detail)


@app.command("check")
def check(drafter: Annotated[str, typer.Argument(help="The drafter: a repo id or a local folder (either order where "
                                                          "the registry knows which side is the drafter).")],
          target: Annotated[str, typer.Argument(help="The target checkpoint: a repo id or a local folder.")],
          as_json: JsonOption = False) -> None:
    """The verdict for one pair; each side is a repo id the registry knows or a local folder with config.json."""
    checked_ref(drafter, "the drafter")
    checked_ref(target, "the target")
    store = open_store()
    drafter, target = pair_order(store, drafter, target, command="check", roles=("drafter", "target"))
    drafter_side = resolve_side(store, drafter, drafter=True)
    target_side = resolve_side(store, target, drafter=False)
    if drafter_side.problem and drafter_side.config is None:
        raise UserError(f"drafter config unusable: {drafter_side.problem}")
    if target_side.problem and target_side.config is None:
        raise UserError(f"target config unusable: {target_side.problem}")
    method = drafter_side.drafter_method
    result = pair.judge(drafter_side, target_side)
    gone = {"drafter": _gone_from_hub(store, drafter, drafter=True),
            "target": _gone_from_hub(store, target, drafter=False)}
    license_ = _license_of(store, drafter)
    notes = _notes_of(store, drafter)
    if as_json:
        # 2: "drafter_license", "drafter_notes".
        render.print_json({"drafter": drafter, "target": target,
                           "method": method, **render.to_jsonable(result), "drafter_gone": gone["drafter"],
                           "target_gone": gone["target"], "drafter_license": license_, "drafter_notes": notes})
        return
    line = render.styled("{} -> {}: ", drafter, target)
    line.append(render.verdict(result.verdict))
    line.append(render.strip_control(f" ({method or render.EMPTY})"))
    render.console.print(line)
    for reason in result.reasons:  # the verdict's why, before the checks it rests on
        render.console.print(render.styled("  because: {}", reason), soft_wrap=False)
    if not looks_like_folder(drafter):
        render.console.print(render.styled("  license: {}", license_ or "unknown"))
    if notes:
        render.console.print(render.styled("  [yellow]note:[/] {}", notes))
    for role, ref in (("drafter", drafter), ("target", target)):
        if gone[role] is not None:
            render.console.print(render.styled(f"  [yellow]note:[/] the {role} {{}} is {{}}", ref, gone[role]))
    for check_ in result.checks:
        mark = {True: "[green]       ok[/]", False: "[red]     FAIL[/]", None: "[yellow]unchecked[/]"}[check_.ok]
        render.console.print(render.styled(f"  {mark} {{}}: {{}}", check_.name, check_.detail))


@app.command("lag")
def lag_command(
    as_json: JsonOption = False,
    by: Annotated[str | None, typer.Option(help="Summarize by 'family' or 'publisher'.")] = None,
    upgrades: Annotated[bool, typer.Option(help="Base upgrades still waiting for a drafter.")] = False,
) -> None:
    """Drafter lag per target, worst first: days from the target's release to its first drafter a user can rely on
    (exact, or declared or named after it by the target's publisher, a catalog publisher or a watched org)."""
    store = open_store()
    now = today().date()
    if upgrades:
        rows_u = upgrade_table(store, now)
        if as_json:
            render.print_json(rows_u)
            return
        render.table(
            "base upgrades",
            ["successor", "predecessor", "predecessor's drafters", "released", "lag (days)", "status"],
            [(r.successor_repo_id, r.predecessor_repo_id, ", ".join(r.predecessor_drafters), r.released,
              r.lag_days, "waiting" if r.open else "closed") for r in rows_u],
        )
        return
    rows = lag_table(store, now)
    if by is not None:
        if by not in ("family", "publisher"):
            raise UserError("--by takes 'family' or 'publisher'")
        groups = lag_by(rows, by, store)
        if as_json:
            # Under "groups": a family or publisher named like a field must never clash with schema_version.
            render.print_json({"by": by, "groups": groups})
            return
        render.table(f"lag by {by}", [by, "targets", "median days", "worst days", "open"],
                     [(name, g.n, g.median_days, g.worst_days, g.open_count) for name, g in groups.items()])
        return
    if as_json:
        render.print_json(rows)
        return
    render.table(
        f"drafter lag as of {now}",
        ["target", "released", "first drafter", "drafter released", "lag (days)", "status", "notes"],
        [(r.target_repo_id, None if r.released is None else f"{r.released}{'' if r.released_precision in (None, 'day') else ' ≈'}",
          built_in_label(r.built_in) or _first_drafter(r), r.first_drafter_released, r.lag_days,
          "open" if r.open else "closed", "; ".join(_lag_notes(r))) for r in rows],
        drop_empty=["notes"],
    )


def _first_drafter(row: LagRow) -> str | None:
    first = row.first_drafter_repo_id
    # A pair that is not exact counts only from a trusted publisher, and still says what it is.
    return next((d for d in row.declared_drafters if d.startswith(f"{first} (")), first) if first else first


def _lag_notes(row: LagRow) -> list[str]:
    """Each method's own lag (a built-in head does not hide a later DFlash), then who left the Hub, then the
    drafters that do not count and why."""
    methods = [f"{m.method} {'built in' if m.first_drafter_repo_id is None else f'{m.lag_days} d' if m.lag_days is not None else 'undated'}"
               for m in row.by_method] if len(row.by_method) > 1 else []
    return [*methods, *row.hub_notes, *(f"not counted: {note}" for note in row.not_counted)]
