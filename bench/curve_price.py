"""`drafters price --concurrency` against measured speedup curves: how far the batch-c roofline
(`registry.domain.pricing_concurrency`) is from what servers measured, level by level.

    .venv/bin/python bench/curve_price.py [--concurrency 1,2,4,8] [--max-new-tokens 32,128] [--threads 1]
    .venv/bin/python bench/curve_price.py --database URL [--draft-length N] [--json]

Without `--database` it first measures the curves it checks: the verifier's curve job (what `drafters verify
--engine llamacpp --concurrency` runs) on the tiny Qwen3 target with its trained draft LM and with its untrained one
(τ near 1, a curve that never pays), llama.cpp on this machine's CPU, one curve per length, into a scratch registry.
With `--database` it checks every curve stored in that registry (`drafters sweep`, curve jobs) instead.

Each curve is predicted at its own levels with its own τ per level (as the server counted it, so the error is the
cost model's, not the acceptance's) on its own hardware: a catalog GPU by its numbers, anything else read from the
curve's baseline points (`registry.calibration.curve_prediction.check_curve`, what `drafters price --concurrency`
shows). Printed per level: measured and predicted speedup, error (predicted − measured) ÷ measured, and both
speedups as a ratio to the curve's lowest level (the shape, which is all a CPU curve of tiny models can say); then
the median |error| and the median |shape error| over every level of every curve checked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from registry.calibration import side_facts  # noqa: E402
from registry.calibration.curve_prediction import CurveCheck, check_curve  # noqa: E402
from registry.domain import pricing  # noqa: E402
from registry.domain.curve import SpeedupCurve  # noqa: E402
from registry.store import Store  # noqa: E402
from verifier.curve_job import CurveRequest  # noqa: E402
from verifier.engines.llamacpp.install import fetch_llama_cpp_source, find_server  # noqa: E402
from verifier.jobs import curve_now  # noqa: E402
from verifier.tiny.qwen3 import cached_draft_lm, cached_target  # noqa: E402

# llama.cpp's tiny GGUFs are f32, which the pricing model has no row for: both sides are priced at 16 bits, which
# keeps the target/drafter byte ratio the speedup depends on (a CPU's bandwidth is fitted from the same bytes).
FALLBACK_QUANT = "bf16"


def quantization_of(curve: SpeedupCurve) -> tuple[pricing.Quantization, str]:
    """The target's quantization as the curve's provenance records it, else FALLBACK_QUANT (and why)."""
    named = curve.provenance.get("quantization")
    if isinstance(named, str):
        try:
            return pricing.quantization(named), named
        except pricing.PricingError:
            pass
    return pricing.quantization(FALLBACK_QUANT), f"{named or 'unrecorded'} priced as {FALLBACK_QUANT}"


def check(store: Store, curve: SpeedupCurve, draft_length: int | None) -> tuple[CurveCheck | None, str]:
    """The curve against the model, or None with why it cannot be (a side whose config cannot be read)."""
    target = side_facts(store, curve.target, drafter=False)
    drafter = side_facts(store, curve.drafter, drafter=True) if curve.drafter else None
    if target.config is None or drafter is None or drafter.config is None:
        return None, "no config for the target or the drafter"
    pair = pricing.pair_shape(target.config, drafter.config, drafter.method, target_parameters=target.parameters,
                              drafter_parameters=drafter.parameters)
    quant, quant_note = quantization_of(curve)
    return check_curve(curve, pair, gamma=draft_length, quant=quant), quant_note


def shape_errors(curve: SpeedupCurve, result: CurveCheck) -> list[tuple[float, float, float]]:
    """(measured, predicted, error) of each level's speedup ÷ the lowest level's, for the levels after the first."""
    if not result.errors:
        return []
    first = result.errors[0]
    out = []
    for e in result.errors[1:]:
        measured, predicted = e.measured / first.measured, e.predicted / first.predicted
        out.append((measured, predicted, (predicted - measured) / measured))
    return out


def measure(args: argparse.Namespace, scratch: Path, console: Console) -> Store:
    """The tiny pairs' curves through the curve job, into a scratch registry."""
    console.print("building (or reusing) the tiny Qwen3 target and its draft LMs, then measuring their curves")
    source = fetch_llama_cpp_source(args.cache, find_server().version)
    os.environ.update(DRAFTERS_LLAMA_CPP_DIR=str(source), DRAFTERS_MODELS_DIR=str(args.cache),
                      DRAFTERS_LLAMACPP_THREADS=str(args.threads))
    target_dir = cached_target(args.cache)
    store = Store.open(f"sqlite:///{scratch / 'registry.db'}")
    levels = tuple(int(c) for c in args.concurrency.split(","))
    lengths = tuple(int(n) for n in args.max_new_tokens.split(","))
    wall = time.perf_counter()
    for trained in (True, False):
        drafter = cached_draft_lm(args.cache, target_dir, trained=trained)
        curve_now(store, CurveRequest(target=str(target_dir), drafter=str(drafter), concurrency=levels,
                                      lengths=lengths, prompt_sets=("code", "chat")))
    console.print(f"measured {2 * len(lengths)} curves in {time.perf_counter() - wall:.1f} s wall")
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="check the curves stored in this registry instead of measuring")
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--max-new-tokens", default="32,128")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--draft-length", type=int, help="γ of curves that do not record theirs")
    parser.add_argument("--cache", type=Path, default=REPO_ROOT / ".cache" / "test-models")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the tables")
    args = parser.parse_args()
    console = Console(stderr=args.json, width=max(Console().width, 140))  # the table is wide: never wrapped per cell
    with tempfile.TemporaryDirectory() as scratch:
        store = Store.open(args.database) if args.database else measure(args, Path(scratch), console)
        report(store, args.draft_length, args.json, console)


def report(store: Store, draft_length: int | None, as_json: bool, console: Console) -> None:
    table = Table("curve", "drafter", "hardware", "new tokens", "γ", "c", "τ", "measured", "predicted", "error",
                  "shape meas / pred", title="predicted vs measured speedup per level (shape: ÷ the lowest level)")
    errors: list[float] = []
    shapes: list[float] = []
    curves_out = []
    skipped: list[str] = []
    for curve in store.curves.curves():
        result, note = check(store, curve, draft_length)
        drafter = Path(curve.drafter or "?").name  # a folder's last part
        if result is None or not result.errors:
            skipped.append(f"curve {curve.curve_id} ({drafter} on {curve.target}): "
                           f"{note if result is None else result.note}")
            continue
        shape = shape_errors(curve, result)
        errors += [abs(e.error) for e in result.errors]
        shapes += [abs(s[2]) for s in shape]
        taus = {p.concurrency: p.tau for p in curve.points}
        for index, e in enumerate(result.errors):
            ratio = f"{shape[index - 1][0]:.2f} / {shape[index - 1][1]:.2f}" if index else "1 / 1"
            tau = taus.get(e.concurrency)
            table.add_row(str(curve.curve_id), drafter, curve.hardware or "-", str(result.max_new_tokens),
                          str(result.gamma), str(e.concurrency), f"{tau:.2f}" if tau else "-", f"{e.measured:.2f}×",
                          f"{e.predicted:.2f}×", f"{e.error:+.0%}", ratio)
        curves_out.append({"curve_id": curve.curve_id, "target": curve.target, "drafter": curve.drafter,
                           "hardware": curve.hardware,
                           "max_new_tokens": result.max_new_tokens, "gamma": result.gamma,
                           "device_basis": result.device_basis, "quantization": note,
                           "test_model": curve.provenance.get("test_model"),
                           "levels": [{"concurrency": e.concurrency, "measured": e.measured, "predicted": e.predicted,
                                       "error": e.error} for e in result.errors],
                           "median_abs_error": result.median_abs_error})
    median = pricing.median(errors)
    shape_median = pricing.median(shapes)
    if as_json:
        print(json.dumps({"curves": curves_out, "skipped": skipped, "levels": len(errors),
                          "median_abs_error": median, "median_abs_shape_error": shape_median}, indent=2))
        return
    console.print(table)
    for line in skipped:
        console.print(f"not checked: {line}")
    if median is None:
        console.print("no curve could be checked")
        return
    console.print(f"median |speedup error| {median:.0%} over {len(errors)} levels of {len(curves_out)} curves; "
                  f"median |shape error| {shape_median:.0%} over {len(shapes)} levels"
                  if shape_median is not None else f"median |speedup error| {median:.0%} over {len(errors)} levels")


if __name__ == "__main__":
    main()
