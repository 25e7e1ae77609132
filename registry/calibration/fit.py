"""Fitting the pricing model's constants to stored runs: the bytes each run's forwards read, and a device (catalog
card with a fitted efficiency, or the run's own hardware with a fitted bandwidth, per-forward overhead and
throughput) from OTHER runs only. Pure arithmetic over records; calibration/__init__.py reads the store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from registry.domain import pricing
from registry.domain.gpus import Gpu, find_gpu
from registry.domain.memory import stored_bits_per_weight
from registry.domain.run import Run

_DTYPE_BITS = {"float32": 32.0, "fp32": 32.0, "float16": 16.0, "bfloat16": 16.0, "bf16": 16.0, "fp16": 16.0}


@dataclass(frozen=True)
class SideFacts:
    config: dict[str, Any] | None
    parameters: int | None
    method: str | None
    basis: str


@dataclass(frozen=True)
class RunBytes:
    run: Run
    pair: pricing.PairShape
    quant: pricing.Quantization
    drafter_quant: pricing.Quantization
    context: int
    step_bytes: float  # bytes a one-token target forward reads
    measured_target_s: float | None  # T(1): forward costs when stored, else 1 / baseline tok/s
    measured_verify: tuple[int, float] | None  # (γ+1, T(γ+1)) from forward costs
    measured_draft: tuple[float, int, float] | None  # (bytes per drafting forward, forwards, T_draft) from costs


# A device that moves one byte per second and has no compute floor: forward_seconds on it is the bytes read.
BYTE_COUNTER = pricing.Device("bytes", "cpu", 1.0, None, None, None, "counts bytes")


def run_bytes(run: Run, target: SideFacts, drafter: SideFacts | None) -> RunBytes | str:
    """What the model needs of a run (its pair's shape, quantization, context and measured forward costs), from
    the sizes of its target and drafter; or why it cannot be priced."""
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
    costs = run.forward_costs
    # Average context during decode: the prompt is short next to the generated tokens, so half the output.
    context = costs.context_length if costs else (run.settings.max_new_tokens // 2 if run.settings else 0)
    step_bytes = (pair.target.streamed_for(1) * bits / 8 + pair.target.kv_bytes(context))
    measured_target_s = (costs.target_step_s if costs else None) or (
        1.0 / run.baseline_tokens_per_s if run.baseline_tokens_per_s else None)
    gamma = costs.gamma if costs and costs.gamma else None
    verify = (gamma + 1, costs.verify_step_s) if costs and costs.verify_step_s and gamma else None
    draft = None
    if costs and costs.draft_step_s and gamma and run.drafter:
        # The drafting step's bytes per forward and how many forwards it takes, from the model's own step costs
        # on a device that moves one byte per second (so "seconds" are bytes).
        forwards = 1 if pair.method in pricing.BLOCK_METHODS else gamma
        counted = pricing.step_costs(pair, gamma, quant=quant, context=context, device=BYTE_COUNTER,
                                     assumptions=pricing.Assumptions(drafter_quantization=drafter_quant))
        draft = (counted.draft_s / forwards, forwards, costs.draft_step_s)
    return RunBytes(run, pair, quant, drafter_quant, context, step_bytes, measured_target_s, verify, draft)


@dataclass(frozen=True)
class Fitted:
    device: pricing.Device
    overhead_s: float
    fitted_from: tuple[str, ...]


def fit_bandwidth_and_overhead(peers: Sequence[RunBytes]) -> tuple[float, float] | None:
    """Least squares over the peers' stored forwards, t = bytes / B + forwards · c (one target step and one
    drafting step per run; their sizes differ, which is what separates B from c). None unless both come out
    positive: then a fixed overhead does not describe these runs and the bandwidth-only fit stands."""
    points = []
    for peer in peers:
        if peer.measured_target_s and peer.run.forward_costs:
            points.append((peer.step_bytes, 1.0, float(peer.measured_target_s)))
        if peer.measured_draft:
            points.append(peer.measured_draft)
    if len(points) < 4:
        return None
    # Normal equations of the 2-parameter fit t = x · bytes + c · forwards.
    sbb = sum(b * b for b, _, _ in points)
    sbn = sum(b * n for b, n, _ in points)
    snn = sum(n * n for _, n, _ in points)
    sbt = sum(b * t for b, _, t in points)
    snt = sum(n * t for _, n, t in points)
    determinant = sbb * snn - sbn * sbn
    if determinant <= 0:
        return None
    per_byte = (sbt * snn - snt * sbn) / determinant
    overhead = (sbb * snt - sbn * sbt) / determinant
    if per_byte <= 0 or overhead <= 0:
        return None
    return 1.0 / per_byte, overhead


def fitted_device(entry: RunBytes, others: Sequence[RunBytes], gpus: tuple[Gpu, ...], *,
            overhead: bool) -> Fitted | str:
    """The catalog card the run names (efficiency fitted from the other runs on catalog cards when at least two
    exist), else the run's own hardware as a device fitted from at least two OTHER runs on the same hardware
    (the same engine's when two exist). `others` never holds the run being predicted."""
    gpu = find_gpu(gpus, entry.run.hardware or "") if entry.run.hardware else None
    if gpu is not None:
        efficiencies, sources = [], []
        for other in others:
            other_gpu = find_gpu(gpus, other.run.hardware or "") if other.run.hardware else None
            if other_gpu is not None and other.measured_target_s:
                efficiencies.append(other.step_bytes / other.measured_target_s / other_gpu.bandwidth_bytes_s)
                sources.append(other.run.run_id)
        if len(efficiencies) < 2:
            device = pricing.device_for(gpu)
            return Fitted(pricing.Device(**{**asdict(device), "basis": device.basis
                                             + " (assumed efficiency: fewer than 2 other GPU runs)"}), 0.0, ())
        fitted = pricing.Assumptions(bandwidth_efficiency=pricing.median(efficiencies) or 0.7)
        return Fitted(pricing.device_for(gpu, fitted), 0.0, tuple(sources))
    on_hardware = [o for o in others if o.run.hardware == entry.run.hardware and o.measured_target_s]
    same_engine = [o for o in on_hardware if o.run.engine == entry.run.engine]
    peers = same_engine if len(same_engine) >= 2 else on_hardware
    if len(peers) < 2:
        # One other run is not a fit, it is a copy of that run's speed.
        return (f"fewer than 2 other runs on {entry.run.hardware!r} to fit its bandwidth from "
                f"(found {len(peers)}; not a catalog GPU)")
    scope = f"{entry.run.engine} " if peers is same_engine else "any-engine "
    joint = fit_bandwidth_and_overhead(peers) if overhead else None
    if joint is not None:
        bandwidth, step_overhead = joint
        basis = (f"effective bandwidth {bandwidth / 1e9:.2f} GB/s and {step_overhead * 1e3:.2f} ms per forward, "
                 f"least squares over the stored forwards of {len(peers)} other {scope}run(s) on this hardware")
    else:
        bandwidth = pricing.median([o.step_bytes / o.measured_target_s for o in peers]) or 1.0  # type: ignore[operator]
        step_overhead = 0.0
        basis = (f"effective bandwidth {bandwidth / 1e9:.2f} GB/s fitted from {len(peers)} other {scope}run(s) on "
                 f"this hardware, no per-forward overhead")
    throughputs = [2.0 * o.pair.target.streamed_parameters * o.measured_verify[0]
                   / max(o.measured_verify[1] - step_overhead, 1e-9) for o in peers if o.measured_verify]
    ops = pricing.median(throughputs) if throughputs else None
    basis += (f", throughput {ops / 1e9:.1f} GOP/s from their verify steps" if ops
              else ", no compute floor (no stored verify costs)")
    device = pricing.Device(name=str(entry.run.hardware), kind="cpu", bandwidth_bytes_s=bandwidth, bf16_ops_s=ops,
                            int8_ops_s=ops, budget_bytes=None, basis=basis)
    return Fitted(device, step_overhead, tuple(o.run.run_id for o in peers))
