"""The speedup at concurrency c, predicted (pure): the batch-1 pricing model (`registry.domain.pricing`) with c
requests decoding in lockstep, and its error against measured speedup curves (`registry.domain.curve`).

The model (docs/pricing.md, "At concurrency c"): a decode step of c requests reads the weights once and each
request's KV cache once, and multiplies every token of every request through the active parameters:
T(c, n) = max((weights + c · KV) / B, 2 · P_active · c · n / C) for n tokens per request. Without the drafter a step
gives every request one token, T(c, 1); with it a step verifies γ+1 tokens per request, T(c, γ+1), after drafting
(one forward over c · (γ+1) positions for block drafters, γ forwards over c tokens for chain drafters), and gives
each request τ tokens. S(c) = τ · T(c, 1) / (T(c, γ+1) + T_draft(c, γ)). At small c the weights dominate and the
speedup is batch 1's; once c · (γ+1) tokens make the verify step compute-bound, its cost grows with c while the
baseline's still does not, and the gain falls, below 1× where τ no longer covers the extra work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from registry.domain.curve import CurvePoint
from registry.domain.pricing import (
    Assumptions,
    Device,
    PairShape,
    PricingError,
    Quantization,
    fit,
    forward_seconds,
    relative_error,
    speedup,
    step_costs,
)


@dataclass(frozen=True)
class PredictedPoint:
    concurrency: int
    tau: float
    speedup: float
    tokens_per_s: float  # all requests together, with the drafter
    baseline_tokens_per_s: float  # all requests together, without
    fits: bool | None  # weights + c requests' KV at the context within the device's budget; None: memory unknown


def predict_curve(pair: PairShape, *, tau: float | Sequence[float], gamma: int, levels: Sequence[int],
                  quant: Quantization, context: int, device: Device,
                  assumptions: Assumptions = Assumptions()) -> tuple[PredictedPoint, ...]:
    """The predicted speedup at each concurrency in `levels`. `tau`: one τ for every level (from the measured
    per-position acceptance at γ), or one per level (a measured curve's own τ, so that the error is the cost
    model's, not the acceptance's)."""
    taus = [float(tau)] * len(levels) if isinstance(tau, (int, float)) else [float(t) for t in tau]
    if len(taus) != len(levels):
        raise PricingError(f"{len(taus)} τ values for {len(levels)} concurrency levels")
    if gamma < 1 or any(c < 1 for c in levels):
        raise PricingError("the draft length and every concurrency must be at least 1")
    one = fit(pair, quant=quant, context=context, device=device, assumptions=assumptions)
    out = []
    for level, level_tau in zip(levels, taus):
        costs = step_costs(pair, gamma, quant=quant, context=context, device=device, assumptions=assumptions,
                           sequences=level)
        gain = speedup(level_tau, costs)
        baseline = level / costs.target_s
        # Every request holds its own KV cache (target and drafter) at the context length.
        fits = None if one.budget_bytes is None else \
            one.target_bytes + one.drafter_bytes + level * one.kv_bytes <= one.budget_bytes
        out.append(PredictedPoint(level, level_tau, gain, baseline * gain, baseline, fits))
    return tuple(out)


def fitted_device(pair: PairShape, points: Sequence[CurvePoint], *, quant: Quantization, context: int,
                  name: str) -> Device:
    """A device the catalog does not name (a CPU), read from a measured curve's *baseline* points only: its
    bandwidth from the lowest level (the weights and KV a step reads ÷ the step's time, as if memory-bound), its
    throughput from the highest (2 · P · c ÷ the step's time, as if compute-bound). The speculative points are
    what is then predicted; none of them enters the fit."""
    ordered = sorted(points, key=lambda p: p.concurrency)
    if not ordered or ordered[0].baseline_tokens_per_s <= 0 or ordered[-1].baseline_tokens_per_s <= 0:
        raise PricingError("the curve has no baseline throughput to read the device from")
    low, high = ordered[0], ordered[-1]
    unit = Device(name, "cpu", 1.0, None, None, None, "")
    # With bandwidth 1 byte/s and no compute floor, forward_seconds is the bytes the step reads.
    read = forward_seconds(pair.target, 1, weight_bits=quant.bits_per_weight, context=context, device=unit,
                           quant=quant, sequences=low.concurrency)
    bandwidth = read * low.baseline_tokens_per_s / low.concurrency  # bytes ÷ (c / tok/s) seconds per step
    ops = 2.0 * pair.target.streamed_for(1) * high.baseline_tokens_per_s  # 2 · P · c ÷ (c / tok/s)
    return Device(name, "cpu", bandwidth, ops, ops, None,
                  f"fitted from the curve's baseline: {bandwidth / 1e9:.2f} GB/s at c={low.concurrency}, "
                  f"{ops / 1e9:.1f} GFLOP/s at c={high.concurrency}")


@dataclass(frozen=True)
class CurveError:
    concurrency: int
    predicted: float
    measured: float
    error: float  # (predicted − measured) / measured


def curve_errors(predicted: Sequence[PredictedPoint], measured: Sequence[CurvePoint]) -> tuple[CurveError, ...]:
    """The predicted speedup against the measured one at every level both have."""
    by_level = {p.concurrency: p for p in measured}
    out = []
    for point in predicted:
        seen = by_level.get(point.concurrency)
        error = relative_error(point.speedup, seen.speedup) if seen is not None else None
        if seen is not None and error is not None and math.isfinite(error):
            out.append(CurveError(point.concurrency, point.speedup, seen.speedup, error))
    return tuple(out)
