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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from registry.domain.configs import DFLASH_FAMILY
from registry.domain.gpus import Gpu
from registry.domain.memory import BF16, FP8, GIB, MXFP4, Q4_0, Q4_K_M, Q8_0, Quantization

# K-quants between Q8_0 and Q4_K_M, for the "what would fit" answer: Q6_K stores 6.5625 bits per weight
# (256-weight super-blocks); Q5_K_M mixes Q5_K and Q6_K blocks (≈5.5–5.9 bits; 5.7 used).
Q6_K = Quantization("Q6_K", 6.5625)
Q5_K_M = Quantization("Q5_K_M", 5.7)
QUANTIZATIONS: tuple[Quantization, ...] = (BF16, FP8, Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, MXFP4)  # most bits first
_QUANT_NAMES = {
    "bf16": BF16, "fp16": BF16, "f16": BF16, "float16": BF16, "bfloat16": BF16,
    "fp8": FP8, "int8": Q8_0, "q80": Q8_0, "q8": Q8_0, "q6k": Q6_K, "q5km": Q5_K_M,
    "q4km": Q4_K_M, "q40": Q4_0, "mxfp4": MXFP4,
    "fp32": Quantization("fp32", 32.0), "float32": Quantization("fp32", 32.0),
}
# llama.cpp's formats; a "would fit at" answer stays within the family the user asked in (GGUF or not).
GGUF_QUANTIZATIONS = frozenset({Q8_0.name, Q6_K.name, Q5_K_M.name, Q4_K_M.name, Q4_0.name})
# Methods whose drafting step is one forward over the whole block; the rest draft one token per forward.
BLOCK_METHODS = DFLASH_FAMILY
# Methods that read the target's KV cache instead of keeping their own.
SHARES_TARGET_CACHE = frozenset({"gemma4-assistant"})


class PricingError(ValueError):
    """Inputs that cannot be priced (no acceptance, unknown quantization, nonsense sizes)."""


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


# ---- what a network reads per forward ------------------------------------------------------------------------


@dataclass(frozen=True)
class KvLayers:
    """A group of layers that each keep bytes_per_token of KV per token (at 2 bytes per element), capped at
    `window` tokens for sliding-window layers."""

    count: int
    bytes_per_token: float  # per layer
    window: int | None = None


@dataclass(frozen=True)
class NetworkShape:
    """One network's cost facts: parameters held, parameters read per token, and its KV cache."""

    parameters: int  # held in memory
    streamed_parameters: int  # read by a one-token forward (an untied input embedding is a lookup, not read)
    expert_parameters: int = 0  # routed-expert part of streamed_parameters (MoE); 0 for dense models
    experts: int = 0
    experts_per_token: int = 0
    kv: tuple[KvLayers, ...] = ()
    notes: tuple[str, ...] = ()

    def kv_bytes(self, context: int, bytes_per_element: float = 2.0) -> float:
        scale = bytes_per_element / 2.0
        return sum(g.count * g.bytes_per_token * scale * (min(context, g.window) if g.window else context)
                   for g in self.kv)

    def streamed_for(self, tokens: int) -> float:
        """Parameters a forward over `tokens` tokens reads: all dense ones, and for a MoE the routed experts the
        tokens hit (expected distinct experts under uniform routing: E · (1 − (1 − k/E)^n))."""
        if not self.experts or not self.expert_parameters:
            return float(self.streamed_parameters)
        hit = self.experts * (1 - (1 - self.experts_per_token / self.experts) ** tokens)
        return self.streamed_parameters - self.expert_parameters + self.expert_parameters * hit / self.experts


def _section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    nested = config.get("text_config")
    return {**config, **nested} if isinstance(nested, Mapping) else config


def _int(config: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def kv_layers(config: Mapping[str, Any]) -> tuple[tuple[KvLayers, ...], tuple[str, ...]]:
    """KV bytes per token per layer from a config, with notes for the rough cases.

    MLA (kv_lora_rank): one compressed latent + the RoPE key per token and layer. Linear-attention / hybrid
    layers (layer_types 'linear_attention', full_attention_interval): only the full-attention layers keep a KV
    cache; the recurrent state is fixed-size and left out. Sliding-window layers keep at most `sliding_window`.
    """
    c = _section(config)
    layers = _int(c, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(c, "num_attention_heads", "n_head")
    hidden = _int(c, "hidden_size", "n_embd", "d_model")
    if layers is None or heads is None:
        return (), ("KV cache unknown (no layer or head count in the config): counted as 0",)
    notes: list[str] = []
    kv_lora = _int(c, "kv_lora_rank")
    if kv_lora is not None:
        rope = _int(c, "qk_rope_head_dim") or 64
        notes.append("MLA: KV = compressed latent + RoPE key per layer (rough)")
        return (KvLayers(layers, (kv_lora + rope) * 2.0),), tuple(notes)
    kv_heads = _int(c, "num_key_value_heads") or heads
    head_dim = _int(c, "head_dim") or (hidden // heads if hidden else None)
    if head_dim is None:
        return (), ("KV cache unknown (no head_dim or hidden_size): counted as 0",)
    per_layer = 2.0 * kv_heads * head_dim * 2.0
    types = c.get("layer_types")
    window = _int(c, "sliding_window")
    if isinstance(types, list) and types and all(isinstance(t, str) for t in types):
        full = sum(1 for t in types if t in ("full_attention", "attention", "global"))
        sliding = sum(1 for t in types if "sliding" in t or t == "local")
        linear = len(types) - full - sliding
        groups = [KvLayers(full, per_layer)] if full else []
        if sliding:
            groups.append(KvLayers(sliding, per_layer, window))
        if linear:
            notes.append(f"{linear} linear-attention layers keep a fixed-size state, not a KV cache (left out; rough)")
        if sliding and window is None:
            notes.append("sliding layers without sliding_window counted at full context")
        return tuple(groups), tuple(notes)
    interval = _int(c, "full_attention_interval")
    if interval is not None and interval > 1:
        full = layers // interval
        notes.append(f"hybrid: {full} of {layers} layers keep a KV cache; linear-attention state left out (rough)")
        return (KvLayers(full, per_layer),), tuple(notes)
    return (KvLayers(layers, per_layer),), tuple(notes)


def shape_from_config(
    config: Mapping[str, Any], *, parameters: int | None = None, extra_parameters: int = 0
) -> NetworkShape | None:
    """A network's shape from its config; `parameters` (counted or from weight bytes) overrides the estimate.

    The estimate counts a gated-MLP decoder: per layer q/k/v/o projections and 3·hidden·intermediate (or the
    routed and shared experts), plus embeddings (and an untied head). `extra_parameters` adds what the config
    does not describe as layers (a drafter's fusion `fc`).
    """
    c = _section(config)
    hidden = _int(c, "hidden_size", "n_embd", "d_model")
    layers = _int(c, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(c, "num_attention_heads", "n_head")
    vocab = _int(c, "vocab_size") or 0
    kv, notes = kv_layers(config)
    if hidden is None or layers is None or heads is None:
        if parameters is None:
            return None
        return NetworkShape(parameters, parameters, kv=kv, notes=notes + ("read per step = all parameters",))
    kv_heads = _int(c, "num_key_value_heads") or heads
    head_dim = _int(c, "head_dim") or hidden // heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    experts = _int(c, "num_experts", "n_routed_experts", "num_local_experts") or 0
    active = _int(c, "num_experts_per_tok", "num_experts_per_token", "moe_topk") or 0
    intermediate = _int(c, "intermediate_size") or 4 * hidden
    expert_size = 3 * hidden * (_int(c, "moe_intermediate_size") or intermediate)
    if experts and active:
        shared = (_int(c, "n_shared_experts", "num_shared_experts") or 0) * expert_size
        dense_first = min(_int(c, "first_k_dense_replace") or 0, layers)
        mlp_total = dense_first * 3 * hidden * intermediate + (layers - dense_first) * (experts * expert_size + shared)
        expert_total = (layers - dense_first) * experts * expert_size
        notes = notes + (f"MoE: {active} of {experts} experts per token (a verify pass hits more)",)
    else:
        mlp_total, expert_total, experts, active = layers * 3 * hidden * intermediate, 0, 0, 0
    tied = c.get("tie_word_embeddings")
    embedding = vocab * hidden
    estimate = layers * attention + mlp_total + embedding * (1 if tied is not False else 2) + extra_parameters
    held = parameters if parameters is not None else estimate
    # An untied input embedding is a row lookup; the head (tied or not) is read in full every token.
    streamed = held - (embedding if tied is False else 0)
    expert_share = round(expert_total * held / estimate) if estimate else 0
    return NetworkShape(held, max(streamed, 0), expert_share, experts, active, kv, notes)


def pair_shape(target_config: Mapping[str, Any] | None, drafter_config: Mapping[str, Any] | None, method: str | None,
               *, target_parameters: int | None = None, drafter_parameters: int | None = None) -> PairShape:
    """Target and drafter shapes. DFlash-family drafters hold no embedding or head (they borrow the target's,
    so a drafting forward also reads the target's head) and add a fusion `fc` of (fused layers × hidden) × hidden;
    EAGLE-3 adds its 3·hidden → hidden `fc`."""
    target = shape_from_config(target_config or {}, parameters=target_parameters)
    if target is None:
        raise PricingError("the target's size is unknown: no parameter count, weight bytes or usable config")
    t = _section(target_config or {})
    head = (_int(t, "vocab_size") or 0) * (_int(t, "hidden_size") or 0)
    d = dict(_section(drafter_config or {}))
    hidden = _int(d, "hidden_size") or 0
    borrowed = 0
    extra = 0
    if method in BLOCK_METHODS:
        dflash = d.get("dflash_config") if isinstance(d.get("dflash_config"), Mapping) else {}
        fused = dflash.get("target_layer_ids") or d.get("target_layer_ids") or []
        extra = len(fused) * hidden * hidden if isinstance(fused, list) else 0
        d["vocab_size"] = 0
        borrowed = head
    elif method == "eagle3":
        extra = 3 * hidden * hidden
    drafter = shape_from_config(d, parameters=drafter_parameters, extra_parameters=extra)
    if drafter is None:
        raise PricingError("the drafter's size is unknown: no weight bytes or usable config")
    return PairShape(target=target, drafter=drafter, method=method, borrowed_parameters=borrowed)


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


# ---- the pair ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairShape:
    target: NetworkShape
    drafter: NetworkShape
    method: str | None
    # Target parameters the drafter's forward also reads: the target's head for DFlash-family drafters, which
    # have no head of their own.
    borrowed_parameters: int = 0


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
                    quant: Quantization, extra_bytes: float = 0.0, kv_bytes_per_element: float = 2.0) -> float:
    """One forward over `tokens` tokens: max(bytes / bandwidth, 2 · parameters · tokens / throughput)."""
    streamed = shape.streamed_for(tokens)
    read = streamed * weight_bits / 8 + shape.kv_bytes(context, kv_bytes_per_element) + extra_bytes
    memory_s = read / device.bandwidth_bytes_s
    ops = device.ops_s(quant)
    # Each token multiplies through its own active parameters (for a MoE, k experts, not every expert hit).
    compute_s = 2.0 * shape.streamed_for(1) * tokens / ops if ops else 0.0
    return max(memory_s, compute_s)


@dataclass(frozen=True)
class StepCosts:
    target_s: float  # T(1)
    verify_s: float  # T(γ+1)
    draft_s: float  # drafting γ tokens


def step_costs(pair: PairShape, gamma: int, *, quant: Quantization, context: int, device: Device,
               assumptions: Assumptions = Assumptions()) -> StepCosts:
    bits = quant.bits_per_weight
    kv_el = assumptions.kv_bytes_per_element
    target_s = forward_seconds(pair.target, 1, weight_bits=bits, context=context, device=device, quant=quant,
                               kv_bytes_per_element=kv_el)
    verify_s = forward_seconds(pair.target, gamma + 1, weight_bits=bits, context=context, device=device,
                               quant=quant, kv_bytes_per_element=kv_el)
    draft_quant = assumptions.drafter_quantization
    borrowed = pair.borrowed_parameters * bits / 8
    drafter_context = 0 if pair.method in SHARES_TARGET_CACHE else context
    if pair.method in BLOCK_METHODS:
        draft_s = forward_seconds(pair.drafter, gamma + 1, weight_bits=draft_quant.bits_per_weight,
                                  context=drafter_context, device=device, quant=draft_quant, extra_bytes=borrowed,
                                  kv_bytes_per_element=kv_el)
    else:
        draft_s = gamma * forward_seconds(pair.drafter, 1, weight_bits=draft_quant.bits_per_weight,
                                          context=drafter_context, device=device, quant=draft_quant,
                                          extra_bytes=borrowed, kv_bytes_per_element=kv_el)
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
