"""How measured runs are shown: the `--json` shape of a run and the tables of `verify`, `compare` and `runs`."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from drafters.cli import render
from registry import calibration
from registry.local import looks_like_folder
from registry.domain.regression import metric_version
from registry.store.runs import RunRecord


def _prediction_json(record: RunRecord, prediction: calibration.RunPrediction | None) -> dict | None:
    """The pricing model's prediction of a run and its errors (`prediction` when given, else the stored one of
    the current model); its `note` says why a number is missing."""
    stored = calibration.stored_prediction(record)
    chosen = prediction or stored
    if chosen is None:
        return None
    return {**asdict(chosen), "source": "stored with the run" if chosen == stored else "computed on read"}


def run_json(record: RunRecord, prediction: calibration.RunPrediction | None = None) -> dict:
    metrics = record.metrics
    return {
        "run_id": record.run_id,
        "status": record.status,
        "failure_reason": record.failure_reason,
        "engine": record.engine,
        "engine_version": record.engine_version,
        "target": record.target,
        "drafter": record.drafter,
        "method": record.method,
        "lossless": record.lossless,
        "tau": record.tau,
        "acceptance_rate": record.acceptance_rate,
        "per_position_acceptance": list(metrics.get("marginal") or []),
        "per_position_acceptance_conditional": list((metrics.get("per_position_acceptance") or {}).get("conditional") or []),
        "acceptance_histogram": metrics.get("acceptance_histogram"),
        "baseline_tokens_per_s": record.baseline_tokens_per_s,
        "tokens_per_s": record.tokens_per_s,
        "speedup": record.speedup,
        "speedup_spread": metrics.get("speedup_spread"),
        "decode_speedup": metrics.get("decode_speedup"),
        "tau_emitted": metrics.get("tau_emitted"),
        "ideal_speedup": metrics.get("ideal_speedup"),
        "efficiency": record.efficiency,
        "forward_costs": metrics.get("forward_costs"),
        "metric_version": metric_version(record),
        "repeats": metrics.get("repeats"),
        "ttft_s": metrics.get("ttft_s"),
        "tpot_s": metrics.get("tpot_s"),
        "draft_time_share": metrics.get("draft_time_share"),
        "peak_memory_bytes": record.peak_memory_bytes,
        "target_weight_bytes": record.target_weight_bytes,
        "drafter_weight_bytes": record.drafter_weight_bytes,
        "per_set": {s.prompt_set: {"tau": s.tau, "acceptance_rate": s.acceptance_rate, "speedup": s.speedup,
                                   "speedup_spread": s.speedup_spread, "lossless": s.lossless,
                                   "per_position_acceptance": list(s.per_position_acceptance)} for s in record.sets},
        "provenance": record.provenance,
        "prediction": _prediction_json(record, prediction),
    }


def _speedup_cell(record: RunRecord) -> str:
    """The median with its min-max over repeats, when the run stored it."""
    spread = record.metrics.get("speedup_spread") or {}
    if record.speedup is None or spread.get("minimum") is None:
        return fmt(record.speedup)
    return f"{fmt(record.speedup)} ({spread['minimum']:.2f}-{spread['maximum']:.2f}, n={spread.get('n')})"


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _label(ref: str | None) -> str:
    """Repo ids as they are; local folders by their last path part, so tables stay readable."""
    if ref is None:
        return "(baseline)"
    return Path(ref).name if looks_like_folder(ref) else ref


def _prediction_cell(prediction: calibration.RunPrediction | None) -> str:
    """Predicted tok/s (speedup) and their errors against the measurement; a dash where the model could not
    predict the run (the reason is in --json's prediction.note)."""
    if prediction is None or not prediction.predicted:
        return "-"
    if prediction.predicted_tokens_per_s is not None and prediction.tokens_per_s_error is not None:
        cell = f"{prediction.predicted_tokens_per_s:.1f} ({prediction.tokens_per_s_error:+.0%})"
    else:
        cell = f"{prediction.predicted_baseline_tokens_per_s:.1f} base ({_pct(prediction.baseline_error)})"
    if prediction.predicted_speedup is not None:
        cell += f", S {prediction.predicted_speedup:.2f} ({_pct(prediction.speedup_error)})"
    return cell


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def print_runs(records: list[RunRecord],
               predictions: dict[str, calibration.RunPrediction] | None = None) -> None:
    """`predictions` by run id; without them, each run's stored prediction from the current model."""
    chosen = predictions if predictions is not None else {
        r.run_id: p for r in records if (p := calibration.stored_prediction(r)) is not None}
    render.table(
        "speculative decoding, measured",
        ["drafter", "engine", "method", "lossless", "τ", "τ emitted", "accept", "base tok/s", "tok/s",
         "speedup (min-max)", "efficiency", "predicted tok/s, S (error)", "peak mem", "metrics v", "run"],
        [
            (_label(r.drafter), r.engine, r.method, r.lossless, fmt(r.tau), fmt(r.metrics.get("tau_emitted")),
             fmt(r.acceptance_rate), fmt(r.baseline_tokens_per_s, ".1f"),
             fmt(r.tokens_per_s, ".1f"), _speedup_cell(r), fmt(r.efficiency), _prediction_cell(chosen.get(r.run_id)),
             f"{r.peak_memory_bytes / 2**20:.0f} MiB" if r.peak_memory_bytes else None, metric_version(r), r.run_id[:12])
            if r.status == "ok" else (_label(r.drafter), r.engine, r.method, "-", "-", "-", "-", "-", "-", "-", "-", "-",
                                      "-", metric_version(r), render.styled("[red]failed:[/] {}", r.failure_reason))
            for r in records
        ],
    )
    for r in records:
        if r.status != "ok":
            continue
        render.table(
            f"{_label(r.drafter)} on {_label(r.target)} ({r.engine}): per prompt set",
            ["prompt set", "τ", "accept", "speedup (min-max spread)", "lossless", "per-position acceptance"],
            [(s.prompt_set, fmt(s.tau), fmt(s.acceptance_rate), f"{fmt(s.speedup)} (±{fmt(s.speedup_spread)})",
              s.lossless, " ".join(f"{m:.2f}" for m in s.per_position_acceptance[:8])) for s in r.sets],
        )
