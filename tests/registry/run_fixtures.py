"""Stored runs made by hand for the registry and dashboard tests: a `SetMeasurement` from the few numbers a test
cares about (τ, per-position acceptance, speedup, tok/s), and one run with every part filled for round trips."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from registry.domain.measurement import (
    Acceptance,
    Divergence,
    ForwardCosts,
    RunSettings,
    SetMeasurement,
    Spread,
    Throughput,
    spread,
)
from registry.domain.run import Run, RunPrediction


def acceptance(marginal: Sequence[float], tau: float | None = None, acceptance_rate: float | None = None,
               rounds: int = 100) -> Acceptance:
    """Pooled acceptance with these per-position rates; τ defaults to 1 + Σ m_i (the identity)."""
    marginal = tuple(float(m) for m in marginal)
    tau = 1.0 + sum(marginal) if tau is None else tau
    drafted = rounds * len(marginal)
    accepted = round((tau - 1.0) * rounds)
    if acceptance_rate is None and drafted:
        acceptance_rate = accepted / drafted
    return Acceptance(rounds=rounds, drafted=drafted, accepted=accepted, tau=tau, acceptance_rate=acceptance_rate,
                      histogram=(), marginal=marginal, conditional=tuple(None for _ in marginal),
                      uniform_draft_length=True, identity_gap=tau - (1.0 + sum(marginal)))


def reading(value: float | None, width: float | None = None) -> Spread | None:
    """Repeats whose median is `value` and whose min-max spread is `width` (one repeat without a width)."""
    if value is None:
        return None
    if not width:
        return spread([value])
    return spread([value - width / 2, value, value + width / 2])


def measured(name: str = "overall", digest: str | None = None, *, tau: float | None = None,
             marginal: Sequence[float] = (), acceptance_rate: float | None = None, speedup: float | None = None,
             speedup_spread: float | None = None, baseline_tokens_per_s: float | None = None,
             tokens_per_s: float | None = None, efficiency: float | None = None, lossless: bool | None = None,
             prompts: int = 1) -> SetMeasurement:
    """One set's (or the run's overall) measurement. With per-position rates (or an acceptance rate) it has an
    `Acceptance`; a τ alone is a reported one (`reported_tau`), as a server without draft counts gives."""
    counted = (acceptance(marginal, tau, acceptance_rate) if marginal or acceptance_rate is not None else None)
    return SetMeasurement(
        name=name, prompts=prompts, digest=digest if digest is not None else name, acceptance=counted,
        reported_tau=tau if counted is None else None, speedup=reading(speedup, speedup_spread),
        baseline_tokens_per_s=reading(baseline_tokens_per_s), tokens_per_s=reading(tokens_per_s),
        efficiency=efficiency, lossless=lossless,
    )


def _throughput(tokens_per_s: float, draft_share: float) -> Throughput:
    return Throughput(prompts=2, output_tokens=128, seconds=128 / tokens_per_s, tokens_per_s=tokens_per_s,
                      ttft_s=0.05, tpot_s=1 / tokens_per_s, target_steps=40, draft_seconds_per_step=0.001,
                      verify_seconds_per_step=0.01, draft_time_share=draft_share)


def full_set(name: str, digest: str, marginal: Sequence[float], speedups: Sequence[float]) -> SetMeasurement:
    """A verifier set with every part measured: baseline and speculative throughput, spreads, acceptance."""
    counted = acceptance(marginal)
    return SetMeasurement(
        name=name, prompts=2, digest=digest, baseline=_throughput(50.0, 0.0),
        baseline_tokens_per_s=spread([49.0, 50.0, 52.0]), speculative=_throughput(90.0, 0.2),
        tokens_per_s=spread([88.0, 90.0, 91.5]), speedup=spread(speedups),
        decode_speedup=spread([s + 0.1 for s in speedups]), acceptance=counted, tau_emitted=counted.tau + 0.25,
        tau_verified=counted.tau + 0.1, tau_per_prompt=counted.tau - 0.05, ideal_speedup=2.4, efficiency=0.75,
        lossless=True,
    )


def full_run(**changes: object) -> Run:
    """A run with every part set (settings, overall and per-set measurements, forward costs, a divergence, a
    prediction, provenance), for tests that check nothing is lost between the harness, the store and the CLI."""
    code = full_set("code", "digest-code", (0.9, 0.7, 0.5), (1.7, 1.8, 1.95))
    chat = full_set("chat", "digest-chat", (0.8, 0.6, 0.3), (1.5, 1.6, 1.62))
    overall = full_set("overall", "digest-all", (0.85, 0.65, 0.4), (1.6, 1.7, 1.8))
    values: dict[str, object] = dict(
        target="tiny/target", drafter="tiny/dflash", engine="pytorch", engine_version="2.5.1", method="dflash",
        draft_length=3, settings=RunSettings(max_new_tokens=32, repeats=3, dtype="float32", seed=7),
        overall=overall, per_set=(code, chat), lossless=False,
        first_divergence=Divergence(prompt_set="chat", prompt_index=1, repeat=0, position=12, baseline_token=42,
                                    speculative_token=7, target_logit_margin=0.03, speculative_token_gap=0.01,
                                    verdict="diverged", float32_gap=0.02, tie_tolerance=0.0078125),
        ties=1,
        forward_costs=ForwardCosts.from_timings(16, 3, [0.010, 0.011, 0.012], [0.014, 0.015, 0.016],
                                                [0.002, 0.0025, 0.003]),
        peak_memory_bytes=123_456_789, peak_memory_kind="process_rss_peak", target_weight_bytes=1_000_000,
        drafter_weight_bytes=200_000, hardware="cpu (test)", device_name="cpu", torch_version="2.5.1",
        transformers_version="4.57.0", target_revision="a" * 40, drafter_revision="b" * 40,
        provenance={"seed": 7, "prompts": {"code": "digest-code"}},
        created_at=datetime(2026, 11, 1, 12, 30, 15, 123456, tzinfo=UTC),
    )
    values["prediction"] = RunPrediction(
        run_id="", target="tiny/target", drafter="tiny/dflash", engine="pytorch", hardware="cpu (test)",
        predicted_baseline_tokens_per_s=55.0, measured_baseline_tokens_per_s=50.0, baseline_error=0.1,
        predicted_tokens_per_s=99.0, measured_tokens_per_s=90.0, tokens_per_s_error=0.1, predicted_speedup=1.8,
        measured_speedup=1.7, speedup_error=1.8 / 1.7 - 1, device_basis="fitted", note="test", model_version=2,
        fitted_from=("r1", "r2"), overhead_s=0.001,
    )
    values.update(changes)
    return Run(**values)  # type: ignore[arg-type]
