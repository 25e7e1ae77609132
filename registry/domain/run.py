"""`Run`: one measured (target, drafter) run, the one shape it has everywhere.

The verifier's harness makes it (target and drafter as the folders it ran), the runner names the pair and its
revisions (`dataclasses.replace`), the store keeps it and hands the same type back, the pricing model predicts it,
and the command line prints it (`registry.domain.stored_json.to_json`, the same encoding the store writes). A run
read from a server's counters (`drafters ingest`) and a failed run are the same type with fewer parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from registry.domain.measurement import (
    METRIC_VERSION,
    Divergence,
    ForwardCosts,
    RunSettings,
    SetMeasurement,
    Spread,
)

# Field metadata: kept in memory for the caller, never stored or printed (see stored_json.to_json).
TRANSIENT = {"transient": True}


@dataclass(frozen=True)
class RunPrediction:
    """The pricing model's forecast of a stored run, made from the other runs (registry.calibration)."""

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
    note: str  # why a number is missing ("not predicted: …"), or what the prediction assumed
    model_version: int
    fitted_from: tuple[str, ...] = ()  # the OTHER runs whose measurements set a fitted constant; never this run
    overhead_s: float = 0.0  # the per-forward overhead used (fitted, or the 0 assumption)

    @property
    def predicted(self) -> bool:
        return self.predicted_baseline_tokens_per_s is not None


@dataclass(frozen=True)
class Run:
    target: str  # repo id, or the folder the harness ran
    drafter: str | None  # None: the target alone (baseline)
    status: str = "ok"  # "ok" or "failed"
    failure_reason: str | None = None
    engine: str = "pytorch"
    engine_version: str | None = None
    method: str | None = None
    draft_length: int | None = None
    settings: RunSettings | None = None  # None: not set by us (a server's counters) or unreadable (a failed run)
    overall: SetMeasurement | None = None  # None: a failed run
    per_set: tuple[SetMeasurement, ...] = ()
    lossless: bool | None = None  # greedy runs with a drafter only
    # The first decode that diverged (else the first tie); a tie is `Divergence.verdict` "tie".
    first_divergence: Divergence | None = None
    # Greedy decodes whose output left the baseline's only at a tie of the run's dtype (lossless still holds: at a
    # tie either token is the target's argmax); None where no greedy check ran or the run predates the rule.
    ties: int | None = None
    forward_costs: ForwardCosts | None = None
    peak_memory_bytes: int | None = None
    # What the figure is: a key of registry.domain.measurement.MEMORY_KINDS; None with the figure when unknown
    # (llama-server offloading to a GPU reports no VRAM peak).
    peak_memory_kind: str | None = None
    target_weight_bytes: int | None = None
    drafter_weight_bytes: int | None = None
    metric_version: int = METRIC_VERSION
    hardware: str | None = None
    device_name: str | None = None
    torch_version: str | None = None
    transformers_version: str | None = None
    target_revision: str | None = None
    drafter_revision: str | None = None
    job_id: int | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    prediction: RunPrediction | None = None
    run_id: str | None = None  # chosen by the store unless the caller needs it up front
    created_at: datetime | None = None
    # "set/index" -> generated token ids of the last repeat (speculative when there is a drafter), for agreement
    # checks in the process that ran it; reproducible from the seed, so not stored.
    generations: dict[str, list[int]] = field(default_factory=dict, compare=False, metadata=TRANSIENT)

    @property
    def tau(self) -> float | None:
        return self.overall.tau if self.overall else None

    @property
    def tau_emitted(self) -> float | None:
        return self.overall.tau_emitted if self.overall else None

    @property
    def acceptance_rate(self) -> float | None:
        return self.overall.acceptance_rate if self.overall else None

    @property
    def per_position_acceptance(self) -> tuple[float, ...]:
        """The pooled marginal acceptance; a run without it (some ingested ones) carries it per set."""
        if self.overall is not None and self.overall.per_position_acceptance:
            return self.overall.per_position_acceptance
        return next((s.per_position_acceptance for s in self.per_set if s.per_position_acceptance), ())

    @property
    def baseline_tokens_per_s(self) -> float | None:
        return _median(self.overall.baseline_tokens_per_s) if self.overall else None

    @property
    def tokens_per_s(self) -> float | None:
        return _median(self.overall.tokens_per_s) if self.overall else None

    @property
    def speedup(self) -> float | None:
        return _median(self.overall.speedup) if self.overall else None

    @property
    def decode_speedup(self) -> float | None:
        return _median(self.overall.decode_speedup) if self.overall else None

    @property
    def efficiency(self) -> float | None:
        return self.overall.efficiency if self.overall else None

    @property
    def temperature(self) -> float:
        return self.settings.temperature if self.settings else 0.0

    @property
    def seed(self) -> int | None:
        return self.settings.seed if self.settings else None

    @property
    def dtype(self) -> str | None:
        return self.settings.dtype if self.settings else None


def _median(spread: Spread | None) -> float | None:
    return spread.median if spread is not None else None
