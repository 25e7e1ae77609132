"""Price a drafter on a card: predicted tokens/s with and without it, the best draft length, and whether the pair
fits. Pure arithmetic, no I/O; the model and its assumptions are written up in docs/pricing.md.

Decode at batch 1 is memory-bound: a forward costs the bytes it reads (weights at the chosen quantization plus
the KV cache at the context length) divided by the achievable bandwidth, with a compute floor (2 operations per
weight per token) that matters once a verify pass scores γ+1 tokens. Speedup at draft length γ is
τ(γ) · T_target(1) / (T_verify(γ+1) + T_draft(γ)), τ(γ) = 1 + Σ_{i≤γ} m_i from the pair's measured marginal
per-position acceptance m_i.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from registry.domain.gpus import Gpu
from registry.domain.memory import BF16, FP8, GIB, MXFP4, Q4_0, Q4_K_M, Q8_0, Quantization
# Re-exported (noqa F401): callers build a PairShape with pricing.pair_shape and price it, all through this module.
from registry.domain.pricing_shape import (  # noqa: F401
    BLOCK_METHODS,
    KvLayers,
    NetworkShape,
    PairShape,
    PricingError,
    kv_layers,
    pair_shape,
    shape_from_config,
)

# K-quants between Q8_0 and Q4_K_M, for the "what would fit" answer: Q6_K stores 6.5625 bits per weight
# (256-weight super-blocks); Q5_K_M mixes Q5_K and Q6_K blocks (≈5.5–5.9 bits; 5.7 used).
Q6_K = Quantization("Q6_K", 6.5625)
Q5_K_M = Quantization("Q5_K_M", 5.7)
QUANTIZATIONS: tuple[Quantization, ...] = (BF16, FP8, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, MXFP4)  # most bits first
# The target quantization every price and memory budget starts from (`drafters price --quant`, the Pair page): a
# Q4_K_M GGUF, what most single-card users run.
DEFAULT_QUANTIZATION = Q4_K_M
_QUANT_NAMES = {
    "bf16": BF16, "fp16": BF16, "f16": BF16, "float16": BF16, "bfloat16": BF16,
    "fp8": FP8, "int8": Q8_0, "q80": Q8_0, "q8": Q8_0, "q6k": Q6_K, "q5km": Q5_K_M,
    "q4km": Q4_K_M, "q40": Q4_0, "mxfp4": MXFP4,
    "fp32": Quantization("fp32", 32.0), "float32": Quantization("fp32", 32.0),
}
# llama.cpp's formats; a "would fit at" answer stays within the family the user asked in (GGUF or not).
GGUF_QUANTIZATIONS = frozenset({Q8_0.name, Q6_K.name, Q5_K_M.name, Q4_K_M.name, Q4_0.name})
# Methods that read the target's KV cache instead of keeping their own.
SHARES_TARGET_CACHE = frozenset({"gemma4-assistant"})


@dataclass(frozen=True)
class Assumptions:
    """The model's constants. Defaults are stated assumptions, not fits; `fit_*` below replace them from runs."""

    bandwidth_efficiency: float = 0.7  # achieved ÷ peak DRAM bandwidth of batch-1 decode kernels
    compute_efficiency: float = 0.5  # achieved ÷ peak dense tensor throughput for a γ+1-token verify
    runtime_reserve_gib: float = 1.0  # CUDA/Metal context, compute buffers, allocator slack
    unified_usable_fraction: float = 0.75  # of a unified-memory machine's RAM the GPU may wire (Metal default)
    kv_bytes_per_element: float = 2.0  # fp16 KV cache
    drafter_quantization: Quantization = BF16  # drafters ship small and unquantized
    # Fixed seconds every forward pays on top of its bytes (kernel launches, Python, sampling). 0 for catalog
    # cards: no GPU run has measured it yet; calibration fits it per hardware and engine from stored forward costs.
    step_overhead_s: float = 0.0


def quantization(name: str) -> Quantization:
    key = "".join(ch for ch in name.lower() if ch.isalnum())
    if key in _QUANT_NAMES:
        return _QUANT_NAMES[key]
    known = ", ".join(q.name for q in QUANTIZATIONS)
    raise PricingError(f"unknown quantization {name!r}; known: {known}")


# ---- devices -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """What the model needs of a device: achievable bandwidth and throughput, and the memory budget."""

    name: str
    kind: str  # "discrete", "unified" or "cpu"
    bandwidth_bytes_s: float  # achievable (peak × efficiency, or fitted)
    bf16_ops_s: float | None  # achievable; None: no compute floor
    int8_ops_s: float | None
    budget_bytes: int | None  # what the pair may use; None: unknown (no fit check)
    basis: str

    def ops_s(self, quant: Quantization) -> float | None:
        """Quantized weights run through int8 kernels where the card has them (llama.cpp MMQ, W8A8); bf16
        otherwise."""
        if quant.bits_per_weight < 16 and self.int8_ops_s:
            return self.int8_ops_s
        return self.bf16_ops_s


def device_for(gpu: Gpu, assumptions: Assumptions = Assumptions()) -> Device:
    memory = gpu.memory_gb * GIB
    if gpu.kind == "unified":
        budget = memory * assumptions.unified_usable_fraction
        reserve = f"{assumptions.unified_usable_fraction:.0%} of unified memory usable by the GPU"
    else:
        budget = memory - assumptions.runtime_reserve_gib * GIB
        reserve = f"{assumptions.runtime_reserve_gib:g} GiB kept for the runtime"

    def ops(value: float | None) -> float | None:
        return value * 1e12 * assumptions.compute_efficiency if value else None

    return Device(
        name=gpu.name,
        kind=gpu.kind,
        bandwidth_bytes_s=gpu.bandwidth_bytes_s * assumptions.bandwidth_efficiency,
        bf16_ops_s=ops(gpu.bf16_tflops),
        int8_ops_s=ops(gpu.int8_tops),
        budget_bytes=int(budget),
        basis=(f"{gpu.bandwidth_gb_s:g} GB/s × {assumptions.bandwidth_efficiency:g}"
               + (f", compute × {assumptions.compute_efficiency:g}" if gpu.bf16_tflops else ", no compute floor")
               + f"; {reserve}"),
    )


def memory_card(memory_gib: int, assumptions: Assumptions = Assumptions()) -> Device:
    """A discrete card of `memory_gib` GiB for the fit check alone (no speed): what `fit` allows on it is its memory
    less the runtime reserve, as on every catalog card (`device_for`)."""
    return Device(name=f"{memory_gib} GiB card", kind="discrete", bandwidth_bytes_s=1.0, bf16_ops_s=None,
                  int8_ops_s=None, budget_bytes=int((memory_gib - assumptions.runtime_reserve_gib) * GIB),
                  basis=f"{assumptions.runtime_reserve_gib:g} GiB kept for the runtime")


# ---- the pair ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Acceptance:
    """Measured marginal per-position acceptance m_1..m_K and where it came from."""

    marginal: tuple[float, ...]
    source: str  # "run 1a2b3c4d5e6f (humaneval, gsm8k)" or "published: …"
    run_id: str | None = None
    prompt_sets: tuple[str, ...] = ()

    def tau(self, gamma: int) -> float:
        if not 0 <= gamma <= len(self.marginal):
            raise PricingError(f"draft length {gamma} outside the measured 0..{len(self.marginal)} positions")
        return 1.0 + sum(self.marginal[:gamma])


def constant_acceptance(tau: float, drafted: int) -> tuple[float, ...]:
    """Marginal rates α^1..α^K for the constant per-token acceptance α that gives τ over K drafted tokens
    (τ = Σ_{i=0..K} α^i), for a published τ without per-position rates."""
    if drafted < 1 or not 1.0 <= tau <= drafted + 1:
        raise PricingError(f"τ {tau} is impossible with {drafted} drafted tokens")
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection: τ(α) is increasing in α
        alpha = (low + high) / 2
        if sum(alpha ** i for i in range(drafted + 1)) < tau:
            low = alpha
        else:
            high = alpha
    alpha = (low + high) / 2
    return tuple(alpha ** i for i in range(1, drafted + 1))


def forward_seconds(shape: NetworkShape, tokens: int, *, weight_bits: float, context: int, device: Device,
                    quant: Quantization, extra_bytes: float = 0.0, kv_bytes_per_element: float = 2.0,
                    sequences: int = 1) -> float:
    """One forward over `tokens` tokens of each of `sequences` sequences batched together: max(bytes / bandwidth,
    2 · parameters · tokens · sequences / throughput). The weights are read once for the whole batch, each
    sequence's KV cache once (docs/pricing.md, "At concurrency c")."""
    streamed = shape.streamed_for(tokens * sequences)
    read = streamed * weight_bits / 8 + sequences * shape.kv_bytes(context, kv_bytes_per_element) + extra_bytes
    memory_s = read / device.bandwidth_bytes_s
    ops = device.ops_s(quant)
    # Each token multiplies through its own active parameters (for a MoE, k experts, not every expert hit).
    compute_s = 2.0 * shape.streamed_for(1) * tokens * sequences / ops if ops else 0.0
    return max(memory_s, compute_s)


@dataclass(frozen=True)
class StepCosts:
    target_s: float  # T(1)
    verify_s: float  # T(γ+1)
    draft_s: float  # drafting γ tokens


def step_costs(pair: PairShape, gamma: int, *, quant: Quantization, context: int, device: Device,
               assumptions: Assumptions = Assumptions(), sequences: int = 1) -> StepCosts:
    """One decode step of `sequences` requests batched together (1: batch-1 decode)."""
    bits = quant.bits_per_weight
    kv_el = assumptions.kv_bytes_per_element
    target_s = forward_seconds(pair.target, 1, weight_bits=bits, context=context, device=device, quant=quant,
                               kv_bytes_per_element=kv_el, sequences=sequences)
    verify_s = forward_seconds(pair.target, gamma + 1, weight_bits=bits, context=context, device=device,
                               quant=quant, kv_bytes_per_element=kv_el, sequences=sequences)
    draft_quant = assumptions.drafter_quantization
    borrowed = pair.borrowed_parameters * bits / 8
    drafter_context = 0 if pair.method in SHARES_TARGET_CACHE else context
    if pair.method in BLOCK_METHODS:
        draft_s = forward_seconds(pair.drafter, gamma + 1, weight_bits=draft_quant.bits_per_weight,
                                  context=drafter_context, device=device, quant=draft_quant, extra_bytes=borrowed,
                                  kv_bytes_per_element=kv_el, sequences=sequences)
    else:
        draft_s = gamma * forward_seconds(pair.drafter, 1, weight_bits=draft_quant.bits_per_weight,
                                          context=drafter_context, device=device, quant=draft_quant,
                                          extra_bytes=borrowed, kv_bytes_per_element=kv_el, sequences=sequences)
    overhead = assumptions.step_overhead_s
    draft_forwards = 1 if pair.method in BLOCK_METHODS else gamma
    return StepCosts(target_s + overhead, verify_s + overhead, draft_s + draft_forwards * overhead)


def speedup(tau: float, costs: StepCosts) -> float:
    return tau * costs.target_s / (costs.verify_s + costs.draft_s)


@dataclass(frozen=True)
class Fit:
    fits: bool | None  # None: the device's memory is unknown
    total_bytes: int
    budget_bytes: int | None
    target_bytes: int
    drafter_bytes: int
    kv_bytes: int
    would_fit_at: str | None  # the most-bits quantization that fits when this one does not; None if none does


def fit(pair: PairShape, *, quant: Quantization, context: int, device: Device,
        assumptions: Assumptions = Assumptions()) -> Fit:
    def total(q: Quantization) -> tuple[int, int, int, int]:
        target = round(pair.target.parameters * q.bits_per_weight / 8)
        drafter = round(pair.drafter.parameters * assumptions.drafter_quantization.bits_per_weight / 8)
        drafter_kv = (0 if pair.method in SHARES_TARGET_CACHE
                      else pair.drafter.kv_bytes(context, assumptions.kv_bytes_per_element))
        kv = round(pair.target.kv_bytes(context, assumptions.kv_bytes_per_element) + drafter_kv)
        return target + drafter + kv, target, drafter, kv

    whole, target, drafter, kv = total(quant)
    if device.budget_bytes is None:
        return Fit(None, whole, None, target, drafter, kv, None)
    fits = whole <= device.budget_bytes
    fitting = None
    if not fits:
        gguf = quant.name in GGUF_QUANTIZATIONS
        fitting = next((q.name for q in QUANTIZATIONS
                        if (q.name in GGUF_QUANTIZATIONS) == gguf and q.bits_per_weight < quant.bits_per_weight
                        and total(q)[0] <= device.budget_bytes), None)
    return Fit(fits, whole, device.budget_bytes, target, drafter, kv, fitting)


@dataclass(frozen=True)
class GammaPoint:
    gamma: int
    tau: float
    speedup: float


@dataclass(frozen=True)
class Price:
    device: str
    device_basis: str
    quantization: str
    context: int
    fit: Fit
    baseline_tokens_per_s: float
    best_gamma: int
    tau: float
    speedup: float
    tokens_per_s: float
    curve: tuple[GammaPoint, ...] = field(default=())
    acceptance_source: str = ""


def price(pair: PairShape, acceptance: Acceptance, device: Device, *, quant: Quantization, context: int,
          assumptions: Assumptions = Assumptions(), gammas: Sequence[int] | None = None) -> Price:
    """Predicted tok/s without and with the drafter on one device, at the γ that maximizes the speedup."""
    if context < 0:
        raise PricingError(f"context must be at least 0 tokens, got {context}")
    if not acceptance.marginal:
        raise PricingError("the acceptance has no per-position rates")
    candidates = list(gammas) if gammas is not None else list(range(1, len(acceptance.marginal) + 1))
    curve = []
    for gamma in candidates:
        costs = step_costs(pair, gamma, quant=quant, context=context, device=device, assumptions=assumptions)
        tau = acceptance.tau(gamma)
        curve.append(GammaPoint(gamma, tau, speedup(tau, costs)))
    best = max(curve, key=lambda p: p.speedup)
    baseline = 1.0 / step_costs(pair, best.gamma, quant=quant, context=context, device=device,
                                assumptions=assumptions).target_s
    return Price(
        device=device.name, device_basis=device.basis, quantization=quant.name, context=context,
        fit=fit(pair, quant=quant, context=context, device=device, assumptions=assumptions),
        baseline_tokens_per_s=baseline, best_gamma=best.gamma, tau=best.tau, speedup=best.speedup,
        tokens_per_s=baseline * best.speedup, curve=tuple(curve), acceptance_source=acceptance.source,
    )


# ---- calibration: predicting measured runs -------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    baseline_tokens_per_s: float
    tokens_per_s: float | None
    speedup: float | None


def predict_run(pair: PairShape, *, tau: float | None, gamma: int | None, quant: Quantization, context: int,
                device: Device, assumptions: Assumptions = Assumptions()) -> Prediction:
    """What the model says a measured run should have shown, given the run's own τ and draft length (so the
    error is the cost model's, not the acceptance's)."""
    if gamma is None or tau is None or gamma < 1:
        costs = step_costs(pair, 1, quant=quant, context=context, device=device, assumptions=assumptions)
        return Prediction(1.0 / costs.target_s, None, None)
    costs = step_costs(pair, gamma, quant=quant, context=context, device=device, assumptions=assumptions)
    gain = speedup(tau, costs)
    return Prediction(1.0 / costs.target_s, gain / costs.target_s, gain)


def relative_error(predicted: float | None, measured: float | None) -> float | None:
    """(predicted − measured) / measured: +0.25 means the model promised 25% more than was measured."""
    if predicted is None or measured is None or measured <= 0 or not math.isfinite(predicted):
        return None
    return (predicted - measured) / measured


def median(values: Sequence[float]) -> float | None:
    ordered = sorted(v for v in values if math.isfinite(v))
    if not ordered:
        return None
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
