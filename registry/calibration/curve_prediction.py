"""The concurrency model (`registry.domain.pricing_concurrency`) against the speedup curves a pair has measured:
each stored curve predicted on its own hardware (a catalog GPU by its numbers, anything else read from the curve's
baseline points) with its own τ per level, and the error at every level. What `drafters price --concurrency` shows
and `bench/curve_price.py` reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from registry.domain import pricing
from registry.domain.curve import SpeedupCurve
from registry.domain.gpus import Gpu, find_gpu, load_gpus
from registry.domain.pricing_concurrency import CurveError, curve_errors, fitted_device, predict_curve


@cache
def _gpus() -> tuple[Gpu, ...]:
    return load_gpus()


@dataclass(frozen=True)
class CurveCheck:
    curve_id: int | None
    hardware: str | None
    engine: str
    max_new_tokens: int
    gamma: int | None
    device_basis: str
    errors: tuple[CurveError, ...]
    note: str | None  # why no error was computed, or what the prediction rests on

    @property
    def median_abs_error(self) -> float | None:
        return pricing.median([abs(e.error) for e in self.errors])


def draft_length_of(curve: SpeedupCurve, given: int | None) -> int | None:
    """The draft length the curve's server ran: recorded in its provenance, else the one the caller states."""
    recorded = curve.provenance.get("draft_length")
    return recorded if isinstance(recorded, int) and recorded > 0 else given


def check_curve(curve: SpeedupCurve, pair: pricing.PairShape, *, gamma: int | None, quant: pricing.Quantization,
                acceptance: pricing.Acceptance | None = None,
                assumptions: pricing.Assumptions = pricing.Assumptions()) -> CurveCheck:
    """Predict `curve` at its own levels and compare. τ per level is the curve's own (counted by the server), else
    τ(γ) of `acceptance`; the context is the generated length (the sweep's prompts are short)."""
    levels = [p.concurrency for p in sorted(curve.points, key=lambda p: p.concurrency)]
    base = dict(curve_id=curve.curve_id, hardware=curve.hardware, engine=curve.engine,
                max_new_tokens=curve.conditions.max_new_tokens)
    length = draft_length_of(curve, gamma)
    if length is None:
        return CurveCheck(**base, gamma=None, device_basis="", errors=(),
                          note="the curve does not record its draft length: give --draft-length")
    ordered = sorted(curve.points, key=lambda p: p.concurrency)
    if all(p.tau is not None for p in ordered):
        tau: float | list[float] = [float(p.tau) for p in ordered if p.tau is not None]
        tau_basis = "τ per level as the server counted it"
    elif acceptance is not None and length <= len(acceptance.marginal):
        tau = acceptance.tau(length)
        tau_basis = f"τ({length}) = {tau:.2f} from {acceptance.source}"
    else:
        return CurveCheck(**base, gamma=length, device_basis="", errors=(),
                          note="no τ: the server counted no drafts and no per-position acceptance covers γ")
    context = curve.conditions.max_new_tokens
    gpu = find_gpu(_gpus(), curve.hardware or "")
    try:
        device = pricing.device_for(gpu, assumptions) if gpu is not None else fitted_device(
            pair, ordered, quant=quant, context=context, name=curve.hardware or "unnamed hardware")
        predicted = predict_curve(pair, tau=tau, gamma=length, levels=levels, quant=quant, context=context,
                                  device=device, assumptions=assumptions)
    except pricing.PricingError as error:
        return CurveCheck(**base, gamma=length, device_basis="", errors=(), note=str(error))
    basis = device.basis if gpu is None else f"{gpu.name}: {device.basis}"
    return CurveCheck(**base, gamma=length, device_basis=basis, errors=curve_errors(predicted, ordered),
                      note=tau_basis)


def median_error(checks: Sequence[CurveCheck]) -> float | None:
    """The median |error| over every level of every checked curve."""
    return pricing.median([abs(e.error) for c in checks for e in c.errors])
