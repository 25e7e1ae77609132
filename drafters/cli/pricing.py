"""`drafters price`: predicted tokens/s and speedup of a pair per GPU class, and the model's error on every run."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from drafters.cli import render
from drafters.cli.common import JsonOption, UserError, app, checked_ref, open_store, pair_order
from registry import calibration
from registry.calibration.curve_prediction import CurveCheck, check_curve, median_error
from registry.domain import pricing
from registry.domain.pricing_concurrency import PredictedPoint, predict_curve
from registry.domain.gpus import find_gpu, load_gpus
from registry.domain.memory import GIB
from verifier.prompts import load_prompt_file


def _prompt_digests(path: Path) -> dict[str, str]:
    """{set name: digest} of a prompt file, computed the way the verifier stores it."""
    prompt_set = load_prompt_file(path)
    return {prompt_set.name: prompt_set.digest}


def _count(parameters: int) -> str:
    return f"{parameters / 1e9:.2f} B" if parameters >= 10**8 else f"{parameters / 1e6:.2f} M"


def _fits_cell(result: pricing.Price) -> str:
    fit = result.fit
    if fit.fits is None:
        return "memory unknown"
    need, have = fit.total_bytes / GIB, (fit.budget_bytes or 0) / GIB
    if fit.fits:
        return f"yes ({need:.1f} of {have:.1f} GiB)"
    return f"does not fit ({need:.1f} of {have:.1f} GiB): " + (
        f"fits at {fit.would_fit_at}" if fit.would_fit_at else "no quantization fits")


@app.command("price")
def price_command(
    target: Annotated[str | None, typer.Argument(help="Target repo id or folder.")] = None,
    drafter: Annotated[str | None, typer.Argument(help="Drafter repo id or folder.")] = None,
    gpu: Annotated[list[str] | None, typer.Option("--gpu", help="GPU class, e.g. 'RTX 3060' (repeatable; default: all).")] = None,
    prompts: Annotated[Path | None, typer.Option("--prompts", help="Use the acceptance measured on this JSONL prompt file.")] = None,
    context: Annotated[int, typer.Option(help="Context length in tokens the KV cache must hold.")] = 8192,
    quant: Annotated[str, typer.Option(help="Target weight quantization: bf16, fp8, q8_0, q6_k, q5_k_m, q4_k_m, q4_0, mxfp4.")] = "q4_k_m",
    published_set: Annotated[str | None, typer.Option("--published-set", help="With no measured run: which published prompt set's τ to use (default: the median one).")] = None,
    calibration_mode: Annotated[bool, typer.Option("--calibration", help="Predict every measured run, store and show the error.")] = False,
    concurrency: Annotated[str | None, typer.Option(
        "--concurrency", help="Also predict the speedup at these concurrencies, e.g. 1,4,16,64, and its error on "
                              "the pair's measured curves.")] = None,
    draft_length: Annotated[int | None, typer.Option(
        "--draft-length", help="γ for --concurrency (default: the best batch-1 γ per GPU; for a measured curve, "
                               "the one it records).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Predicted tok/s without and with the drafter on each GPU class, from the pair's measured acceptance."""
    if calibration_mode:
        _calibration(as_json)
        return
    if target is None or drafter is None:
        raise UserError("give TARGET and DRAFTER (or --calibration)")
    checked_ref(target, "TARGET")
    checked_ref(drafter, "DRAFTER")
    if context < 0:
        raise UserError(f"--context must be at least 0 tokens, got {context}")
    quantization = pricing.quantization(quant)
    levels = _levels(concurrency) if concurrency is not None else None
    if draft_length is not None and draft_length < 1:
        raise UserError(f"--draft-length must be at least 1, got {draft_length}")
    gpus = load_gpus()
    chosen = list(gpus)
    if gpu:
        chosen = []
        for name in gpu:
            found = find_gpu(gpus, name)
            if found is None:
                raise UserError(f"unknown GPU {name!r}; known: {', '.join(g.name for g in gpus)}")
            chosen.append(found)
    store = open_store()
    target, drafter = pair_order(store, target, drafter, command="price", roles=("target", "drafter"))
    digests = _prompt_digests(prompts) if prompts is not None else None
    try:
        acceptance = calibration.measured_acceptance(store, target, drafter, prompt_digests=digests)
    except calibration.PricingInputError as exc:
        # Nothing measured: a published τ stands in, labelled as such (never for the user's own prompts).
        try:
            published = None if digests else calibration.published_acceptance(target, drafter, published_set)
        except calibration.PricingInputError as bad:
            raise UserError(str(bad)) from None
        if published is None:
            raise UserError(str(exc)) from None
        acceptance = published
    target_facts = calibration.side_facts(store, target, drafter=False)
    drafter_facts = calibration.side_facts(store, drafter, drafter=True)
    pair = pricing.pair_shape(target_facts.config, drafter_facts.config, drafter_facts.method,
                              target_parameters=target_facts.parameters, drafter_parameters=drafter_facts.parameters)
    results = [pricing.price(pair, acceptance, pricing.device_for(g), quant=quantization, context=context)
               for g in chosen]
    assumptions = pricing.Assumptions()
    notes = [
        f"acceptance: {acceptance.source}",
        f"target ≈ {_count(pair.target.parameters)} parameters ({target_facts.basis}) at {quantization.name}; "
        f"drafter ≈ {_count(pair.drafter.parameters)} ({drafter_facts.basis}) at "
        f"{assumptions.drafter_quantization.name}; method {drafter_facts.method or 'unknown'}",
        f"KV cache at {context} tokens, fp16: target {pair.target.kv_bytes(context) / GIB:.2f} GiB, drafter "
        f"{pair.drafter.kv_bytes(context) / GIB:.2f} GiB" + "".join(f"; {n}" for n in pair.target.notes),
        f"assumed: {assumptions.bandwidth_efficiency:.0%} of peak bandwidth, {assumptions.compute_efficiency:.0%} "
        f"of dense tensor throughput, {assumptions.runtime_reserve_gib:g} GiB runtime reserve on discrete cards, "
        f"{assumptions.unified_usable_fraction:.0%} of unified memory usable; no per-step overhead "
        "(see docs/pricing.md; `drafters price --calibration` shows the error on measured runs)",
    ]
    curves: list[tuple[str, int, tuple[PredictedPoint, ...]]] = []
    checks: list[CurveCheck] = []
    if levels is not None:
        for g, r in zip(chosen, results):
            gamma = min(draft_length or r.best_gamma, len(acceptance.marginal))
            curves.append((g.name, gamma, predict_curve(pair, tau=acceptance.tau(gamma), gamma=gamma, levels=levels,
                                                        quant=quantization, context=context,
                                                        device=pricing.device_for(g))))
        checks = [check_curve(c, pair, gamma=draft_length, quant=quantization, acceptance=acceptance)
                  for c in store.curves.curves(target=target, drafter=drafter)]
        notes.append("at concurrency c: a step of c requests reads the weights once and each request's KV once, "
                     "and computes c · (γ+1) tokens (docs/pricing.md, \"At concurrency c\")")
    if as_json:
        body: dict[str, object] = {
            "target": target, "drafter": drafter, "quantization": quantization.name, "context": context,
            "acceptance": {"source": acceptance.source, "run_id": acceptance.run_id,
                           "prompt_sets": list(acceptance.prompt_sets), "marginal": list(acceptance.marginal)},
            "notes": notes,
            "gpus": [asdict(r) for r in results],
        }
        if levels is not None:
            # schema 4: the predicted curve per GPU class, and the error on each measured curve of the pair
            body["concurrency"] = {
                "levels": levels,
                "gpus": [{"gpu": name, "gamma": gamma, "points": [asdict(p) for p in points]}
                         for name, gamma, points in curves],
                "measured_curves": [{**asdict(c), "median_abs_error": c.median_abs_error} for c in checks],
                "median_abs_error": median_error(checks)}
        render.print_json(body)
        return
    rows = []
    for r in results:
        fits = r.fit.fits is not False
        rows.append((r.device, _fits_cell(r),
                     f"{r.baseline_tokens_per_s:.1f}" if fits else "-",
                     f"{r.tokens_per_s:.1f}" if fits else "-",
                     f"{r.speedup:.2f}×" if fits else "-",
                     str(r.best_gamma) if fits else "-",
                     f"{r.tau:.2f}" if fits else "-"))
    render.table(f"{drafter} on {target}: {quantization.name}, context {context}",
                 ["GPU", "fits?", "tok/s alone", "tok/s with drafter", "speedup", "best γ", "τ(γ)"], rows,
                 no_wrap=["tok/s alone", "speedup"])
    if levels is not None:
        _print_concurrency(levels, curves, checks)
    for note in notes:
        render.console.print(render.styled("[dim]{}[/]", note))


def _levels(text: str) -> list[int]:
    try:
        levels = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"--concurrency takes numbers separated by commas, e.g. 1,4,16; got {text!r}") from None
    if not levels or levels[0] < 1 or levels[-1] > 4096:
        raise UserError("--concurrency takes values from 1 to 4096")
    return levels


def _print_concurrency(levels: list[int], curves: list[tuple[str, int, tuple[PredictedPoint, ...]]],
                       checks: list[CurveCheck]) -> None:
    render.table("predicted speedup at each concurrency (no fit: weights + c requests' KV exceed the memory)",
                 ["GPU", "γ", *(f"c={c}" for c in levels)],
                 [(name, str(gamma), *(f"{p.speedup:.2f}×" if p.fits is not False else "no fit" for p in points))
                  for name, gamma, points in curves])
    if not checks:
        render.console.print("no measured curve of this pair to check the prediction against (`drafters sweep`)")
        return
    render.table("measured curves: predicted / measured speedup (error)",
                 ["curve", "hardware", "engine", "new tokens", "γ", "levels", "median |error|", "basis"],
                 [(str(c.curve_id), c.hardware or "-", c.engine, str(c.max_new_tokens), str(c.gamma or "-"),
                   ", ".join(f"c={e.concurrency} {e.predicted:.2f}/{e.measured:.2f} ({e.error:+.0%})" for e in c.errors)
                   or "-", "-" if c.median_abs_error is None else f"{c.median_abs_error:.0%}",
                   "; ".join(x for x in (c.device_basis, c.note) if x)) for c in checks])
    overall = median_error(checks)
    if overall is not None:
        render.console.print(f"median |speedup error| {overall:.0%} over {sum(len(c.errors) for c in checks)} "
                             "measured levels")


def _calibration(as_json: bool) -> None:
    store = open_store()
    predictions = calibration.predict_runs(store)
    calibration.store_predictions(store, predictions)
    if as_json:
        render.print_json([asdict(p) for p in predictions])
        return
    if not predictions:
        render.console.print("no measured run to predict yet: `drafters verify TARGET DRAFTER` measures one")
        return

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:+.0%}"

    def num(value: float | None, spec: str = ".1f") -> str:
        return "-" if value is None else format(value, spec)

    render.table(
        "prediction vs measurement (error = predicted / measured − 1)",
        ["run", "drafter", "engine", "hardware", "base tok/s pred/meas", "err", "tok/s pred/meas", "err",
         "speedup pred/meas", "err", "note"],
        [(p.run_id[:12], Path(p.drafter).name if p.drafter else "(baseline)", p.engine, p.hardware,
          f"{num(p.predicted_baseline_tokens_per_s)} / {num(p.measured_baseline_tokens_per_s)}", pct(p.baseline_error),
          f"{num(p.predicted_tokens_per_s)} / {num(p.measured_tokens_per_s)}", pct(p.tokens_per_s_error),
          f"{num(p.predicted_speedup, '.2f')} / {num(p.measured_speedup, '.2f')}", pct(p.speedup_error),
          p.note + (f"; {p.device_basis}" if p.device_basis else ""))
         for p in predictions],
    )
    errors = [abs(p.speedup_error) for p in predictions if p.speedup_error is not None]
    if errors:
        render.console.print(f"median |speedup error| {pricing.median(errors):.0%} over {len(errors)} runs")
