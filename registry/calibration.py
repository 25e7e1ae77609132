"""The pricing model against the registry: find a pair's measured acceptance and sizes, and predict every stored
run on real hardware so the model's error is known (stored in the run's metrics under "prediction").

Constants are fitted leave-one-out: a run is never predicted with a bandwidth or efficiency fitted from itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from sqlalchemy import select

from registry import pricing
from registry.catalog import load_catalog_data
from registry.configs import ConfigError, detect_method, parse_config
from registry.gpus import Gpu, find_gpu, load_gpus
from registry.local import LocalRepoError, looks_like_folder, read_local_repo
from registry.memory import stored_bits_per_weight
from registry.models import BenchmarkRun
from registry.runs import RunRecord, list_runs
from registry.store import Store

PREDICTION_KEY = "prediction"
MODEL_VERSION = 1
_DTYPE_BITS = {"float32": 32.0, "fp32": 32.0, "float16": 16.0, "bfloat16": 16.0, "bf16": 16.0, "fp16": 16.0}


class PricingInputError(ValueError):
    """Something the price command needs is missing (no measured run, unknown sizes); the message says what."""


@dataclass(frozen=True)
class SideFacts:
    config: dict[str, Any] | None
    parameters: int | None
    method: str | None
    basis: str


def side_facts(store: Store, ref: str, *, drafter: bool) -> SideFacts:
    """Config and parameter count of a repo id (registry head revision, else the bundled catalog) or a folder."""
    if looks_like_folder(ref):
        try:
            local = read_local_repo(Path(ref))
            config = parse_config(local.config_raw)
        except (LocalRepoError, ConfigError) as exc:
            return SideFacts(None, None, None, f"unreadable folder ({exc})")
        parameters = round(local.weight_bytes * 8 / stored_bits_per_weight(config)) if local.weight_bytes else None
        method = (detect_method(config) or "draft-lm") if drafter else None
        return SideFacts(config, parameters, method, "local folder weights")
    config: dict[str, Any] | None = None
    parameters: int | None = None
    method: str | None = None
    basis = "config estimate"
    if drafter:
        record = store.get_drafter(ref)
        head = store.drafter_head_revision(ref) if record else None
        method = record.method if record else None
        if head is not None:
            config = head.config
            if head.weight_bytes:
                parameters = round(head.weight_bytes * 8 / stored_bits_per_weight(config))
                basis = "registry weight bytes"
    else:
        head = store.head_revision(ref) if store.get_checkpoint(ref) else None
        if head is not None:
            config = head.config
            if head.parameter_count:
                parameters, basis = head.parameter_count, "registry parameter count"
            elif head.weight_bytes:
                parameters = round(head.weight_bytes * 8 / stored_bits_per_weight(config))
                basis = "registry weight bytes"
    if config is None:
        catalog = load_catalog_data()
        if drafter:
            entry = next((d for d in catalog.drafters if d.repo_id == ref), None)
            if entry is not None:
                config, method = entry.config, method or entry.method
                if entry.weight_bytes and parameters is None:
                    parameters = round(entry.weight_bytes * 8 / stored_bits_per_weight(config))
        else:
            target = next((t for t in catalog.targets if t.repo_id == ref), None)
            config = target.config if target else None
        basis = basis if parameters is not None else "config estimate (bundled catalog)"
    if method is None and drafter and config:
        method = detect_method(config)
    return SideFacts(config, parameters, method, basis)


def measured_acceptance(store: Store, target: str, drafter: str, *,
                        prompt_digests: dict[str, str] | None = None) -> pricing.Acceptance:
    """The newest successful run's marginal per-position acceptance; with prompt digests, only a run measured on
    exactly those prompts (its matching sets' rates, pooled by prompt set weight-free mean)."""
    runs = [r for r in list_runs(store, target=target, drafter=drafter, status="ok") if _marginal(r)]
    if prompt_digests:
        wanted = set(prompt_digests.values())
        for run in runs:
            sets = [s for s in run.sets if s.prompt_set_digest in wanted and s.per_position_acceptance]
            if sets:
                width = min(len(s.per_position_acceptance) for s in sets)
                marginal = tuple(sum(s.per_position_acceptance[i] for s in sets) / len(sets) for i in range(width))
                names = tuple(s.prompt_set for s in sets)
                return pricing.Acceptance(marginal, _source(run, names), run.run_id, names)
        raise PricingInputError(
            f"no measured run of {drafter} on {target} used these prompts: run `drafters verify {target} {drafter} "
            f"--prompts FILE` first")
    if not runs:
        raise PricingInputError(
            f"no measured per-position acceptance for {drafter} on {target}: run `drafters verify {target} {drafter}` "
            f"first")
    run = runs[0]
    names = tuple(s.prompt_set for s in run.sets)
    return pricing.Acceptance(tuple(_marginal(run)), _source(run, names), run.run_id, names)


def published_acceptance(target: str, drafter: str, prompt_set: str | None = None) -> pricing.Acceptance | None:
    """A published τ for the pair (registry/data/published_acceptance.json), spread over positions as a constant
    per-token acceptance; the median published set unless `prompt_set` names one. None when nothing is published."""
    document = json.loads(resources.files("registry").joinpath("data", "published_acceptance.json").read_text("utf-8"))
    entry = next((e for e in document["entries"] if e["target"] == target and e["drafter"] == drafter), None)
    if entry is None:
        return None
    taus: dict[str, float] = entry["tau"]
    if prompt_set is not None:
        if prompt_set not in taus:
            raise PricingInputError(f"no published τ of {drafter} on {prompt_set!r}; published: {', '.join(taus)}")
        chosen = prompt_set
    else:
        ordered = sorted(taus, key=lambda name: taus[name])
        chosen = ordered[(len(ordered) - 1) // 2]  # the lower median: a real set, not an average of domains
    marginal = pricing.constant_acceptance(taus[chosen], int(entry["drafted"]))
    label = (f"published, not measured: τ {taus[chosen]:.2f} on {chosen}"
             + ("" if prompt_set else f" (median of {len(taus)} published sets)")
             + f", {entry['engine']} on {entry['hardware']}, T={entry['temperature']:g}; spread as constant "
             f"acceptance α={marginal[0]:.2f} per position ({entry['source']})")
    return pricing.Acceptance(marginal, label, None, (chosen,))


def _marginal(run: RunRecord) -> list[float]:
    values = run.metrics.get("marginal") or []
    if not values:
        # Runs without the pooled rates (ingested ones) carry them per set.
        values = next((list(s.per_position_acceptance) for s in run.sets if s.per_position_acceptance), [])
    return [float(v) for v in values]


def _source(run: RunRecord, sets: Sequence[str]) -> str:
    return f"run {run.run_id[:12]} ({', '.join(sets) or 'no prompt set'}; {run.engine} on {run.hardware})"


# ---- calibration ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPrediction:
    run_id: str
    target: str
    drafter: str | None
    engine: str
    hardware: str | None
    predicted_baseline_tokens_per_s: float | None
    measured_baseline_tokens_per_s: float | None
    baseline_error: float | None
    predicted_tokens_per_s: float | None
    measured_tokens_per_s: float | None
    tokens_per_s_error: float | None
    predicted_speedup: float | None
    measured_speedup: float | None
    speedup_error: float | None
    device_basis: str
    note: str  # why a number is missing, or what the prediction assumed


@dataclass(frozen=True)
class _RunBytes:
    run: RunRecord
    pair: pricing.PairShape
    quant: pricing.Quantization
    drafter_quant: pricing.Quantization
    context: int
    step_bytes: float  # bytes a one-token target forward reads
    measured_target_s: float | None  # T(1): forward costs when stored, else 1 / baseline tok/s
    measured_verify: tuple[int, float] | None  # (γ+1, T(γ+1)) from forward costs


def _run_bytes(store: Store, run: RunRecord) -> _RunBytes | str:
    target = side_facts(store, run.target, drafter=False)
    drafter = side_facts(store, run.drafter, drafter=True) if run.drafter else None
    stored_bits = stored_bits_per_weight(target.config)
    parameters = target.parameters
    if parameters is None and run.target_weight_bytes and run.engine != "llama.cpp":
        parameters = round(run.target_weight_bytes * 8 / stored_bits)  # a GGUF's bytes say nothing of its count
    if target.config is None and parameters is None:
        return f"target size unknown ({target.basis})"
    method = run.method or (drafter.method if drafter else None)
    drafter_parameters = drafter.parameters if drafter else 0
    if drafter is not None and drafter_parameters is None and run.drafter_weight_bytes:
        drafter_parameters = round(run.drafter_weight_bytes * 8 / stored_bits_per_weight(drafter.config))
    try:
        pair = pricing.pair_shape(target.config, drafter.config if drafter else None, method,
                                  target_parameters=parameters,
                                  drafter_parameters=drafter_parameters)
    except pricing.PricingError as exc:
        return str(exc)
    if run.engine == "llama.cpp" and run.target_weight_bytes:
        # A GGUF's size is what it holds in memory: its effective bits per weight.
        bits = run.target_weight_bytes * 8 / max(pair.target.parameters, 1)
    else:
        bits = _DTYPE_BITS.get(str(run.dtype or "").lower(), stored_bits)
    quant = pricing.Quantization(f"{bits:.2f}-bit", bits)
    drafter_bits = bits
    if run.engine == "llama.cpp" and run.drafter_weight_bytes and pair.drafter.parameters:
        drafter_bits = run.drafter_weight_bytes * 8 / pair.drafter.parameters
    drafter_quant = pricing.Quantization(f"{drafter_bits:.2f}-bit", drafter_bits)
    settings = run.metrics.get("settings") or {}
    costs = run.metrics.get("forward_costs") or {}
    # Average context during decode: the prompt is short next to the generated tokens, so half the output.
    context = int(costs.get("context_length") or (settings.get("max_new_tokens") or 0) // 2)
    step_bytes = (pair.target.streamed_for(1) * bits / 8 + pair.target.kv_bytes(context))
    measured_target_s = costs.get("target_step_s") or (
        1.0 / run.baseline_tokens_per_s if run.baseline_tokens_per_s else None)
    verify = ((int(costs["gamma"]) + 1, float(costs["verify_step_s"]))
              if costs.get("verify_step_s") and costs.get("gamma") else None)
    return _RunBytes(run, pair, quant, drafter_quant, context, step_bytes, measured_target_s, verify)


def _device(entry: _RunBytes, others: Sequence[_RunBytes], gpus: tuple[Gpu, ...]) -> pricing.Device | str:
    """The catalog card the run names (efficiency fitted from the other runs on catalog cards when at least two
    exist), else the run's own hardware as a device whose bandwidth and throughput come from the OTHER runs on
    the same hardware (leave-one-out)."""
    gpu = find_gpu(gpus, entry.run.hardware or "") if entry.run.hardware else None
    if gpu is not None:
        efficiencies = []
        for other in others:
            other_gpu = find_gpu(gpus, other.run.hardware or "") if other.run.hardware else None
            if other_gpu is not None and other.measured_target_s:
                efficiencies.append(other.step_bytes / other.measured_target_s / other_gpu.bandwidth_bytes_s)
        assumptions = pricing.Assumptions()
        if len(efficiencies) >= 2:
            assumptions = pricing.Assumptions(bandwidth_efficiency=pricing.median(efficiencies) or 0.7)
        device = pricing.device_for(gpu, assumptions)
        return device if len(efficiencies) >= 2 else pricing.Device(
            **{**asdict(device), "basis": device.basis + " (assumed efficiency: fewer than 2 other GPU runs)"})
    peers = [o for o in others if o.run.hardware == entry.run.hardware and o.measured_target_s]
    if not peers:
        return f"no other run on {entry.run.hardware!r} to fit its bandwidth from (and not a catalog GPU)"
    bandwidth = pricing.median([o.step_bytes / o.measured_target_s for o in peers])  # type: ignore[operator]
    throughputs = [2.0 * o.pair.target.streamed_parameters * o.measured_verify[0] / o.measured_verify[1]
                   for o in peers if o.measured_verify]
    ops = pricing.median(throughputs) if throughputs else None
    return pricing.Device(
        name=str(entry.run.hardware), kind="cpu", bandwidth_bytes_s=bandwidth or 1.0, bf16_ops_s=ops, int8_ops_s=ops,
        budget_bytes=None,
        basis=(f"effective bandwidth {(bandwidth or 0) / 1e9:.2f} GB/s fitted from {len(peers)} other run(s) on this "
               f"hardware" + (f", throughput {ops / 1e9:.1f} GOP/s from their verify steps" if ops else
                              ", no compute floor (no stored verify costs)")),
    )


def predict_runs(store: Store) -> list[RunPrediction]:
    """Predict every successful run on real hardware (pytorch, llama.cpp, ingested) from the model alone."""
    gpus = load_gpus()
    runs = [r for r in list_runs(store, status="ok") if r.baseline_tokens_per_s or r.tokens_per_s]
    prepared: list[_RunBytes | str] = [_run_bytes(store, run) for run in runs]
    usable = [p for p in prepared if isinstance(p, _RunBytes)]
    results = []
    for run, entry in zip(runs, prepared, strict=True):
        if isinstance(entry, str):
            results.append(_missing(run, entry))
            continue
        device = _device(entry, [o for o in usable if o.run.run_id != run.run_id], gpus)
        if isinstance(device, str):
            results.append(_missing(run, device))
            continue
        gamma = run.draft_length or (len(_marginal(run)) or None)
        tau = run.tau if run.drafter else None
        predicted = pricing.predict_run(entry.pair, tau=tau, gamma=gamma, quant=entry.quant, context=entry.context,
                                        device=device,
                                        assumptions=pricing.Assumptions(drafter_quantization=entry.drafter_quant))
        results.append(RunPrediction(
            run_id=run.run_id, target=run.target, drafter=run.drafter, engine=run.engine, hardware=run.hardware,
            predicted_baseline_tokens_per_s=predicted.baseline_tokens_per_s,
            measured_baseline_tokens_per_s=run.baseline_tokens_per_s,
            baseline_error=pricing.relative_error(predicted.baseline_tokens_per_s, run.baseline_tokens_per_s),
            predicted_tokens_per_s=predicted.tokens_per_s, measured_tokens_per_s=run.tokens_per_s,
            tokens_per_s_error=pricing.relative_error(predicted.tokens_per_s, run.tokens_per_s),
            predicted_speedup=predicted.speedup, measured_speedup=run.speedup,
            speedup_error=pricing.relative_error(predicted.speedup, run.speedup),
            device_basis=device.basis,
            note=(f"{entry.quant.name} weights, context {entry.context}, γ={gamma}, "
                  f"τ={'-' if tau is None else round(tau, 2)}"),
        ))
    return results


def _missing(run: RunRecord, reason: str) -> RunPrediction:
    return RunPrediction(run.run_id, run.target, run.drafter, run.engine, run.hardware, None,
                         run.baseline_tokens_per_s, None, None, run.tokens_per_s, None, None, run.speedup, None, "",
                         f"not predicted: {reason}")


def store_predictions(store: Store, predictions: Sequence[RunPrediction]) -> int:
    """Write each prediction into its run's metrics (key "prediction"); returns how many runs changed."""
    changed = 0
    by_id = {p.run_id: p for p in predictions}
    with store.session() as session:
        for row in session.scalars(select(BenchmarkRun).where(BenchmarkRun.run_id.in_(list(by_id)))):
            value = json.loads(json.dumps({**asdict(by_id[row.run_id]), "model_version": MODEL_VERSION}))
            metrics = dict(row.metrics or {})
            if metrics.get(PREDICTION_KEY) != value:
                metrics[PREDICTION_KEY] = value
                row.metrics = metrics  # a new dict, so the JSON column sees the change
                changed += 1
    return changed
