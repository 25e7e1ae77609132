"""A measured run as the store keeps it: one place turns the harness's `PairRun` (or a failure) into a `RunSpec`.

The request comes in through `RunRequest`, the few fields of a verification request the record needs, so the kit
never imports the runner (`verifier.jobs.VerifyRequest` fits it as is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from registry.domain.engines import VERIFIER_ENGINES
from registry.store.records import RunSpec, SetResult
from verifier.harness.contract import PairRun


class RunRequest(Protocol):
    """What was asked for: the pair, its revisions, the engine and the settings."""

    @property
    def target(self) -> str: ...

    @property
    def drafter(self) -> str | None: ...

    @property
    def target_revision(self) -> str | None: ...

    @property
    def drafter_revision(self) -> str | None: ...

    @property
    def engine(self) -> str: ...

    @property
    def settings(self) -> Mapping[str, Any]: ...

    def to_payload(self) -> dict[str, Any]: ...


def _hardware(provenance: dict[str, Any]) -> str:
    return str(provenance.get("device") or "unknown")


def run_spec(request: RunRequest, run: PairRun, *, job_id: int | None, run_id: str | None = None) -> RunSpec:
    """The harness's PairRun as a stored run: overall numbers, per-set results, provenance. `metrics` carries the
    metric version and, from version 2, the forward costs a run's efficiency is recomputed from
    (`verifier.metrics.recompute_efficiency`)."""
    summary = run.to_dict()
    provenance = dict(run.provenance)
    marginal = (summary.get("per_position_acceptance") or {}).get("marginal") or []
    sets = []
    for result in run.per_set:
        acc = result.acceptance
        sets.append(
            SetResult(
                prompt_set=result.name,
                prompt_set_digest=result.digest,
                tau=acc.tau if acc else None,
                tau_spread=None,  # τ is pooled over repeats; with greedy decoding it does not vary
                acceptance_rate=acc.acceptance_rate if acc else None,
                per_position_acceptance=tuple(acc.marginal) if acc else (),
                baseline_tokens_per_s=result.baseline_tokens_per_s.median,
                tokens_per_s=result.tokens_per_s.median if result.tokens_per_s else None,
                speedup=result.speedup.median if result.speedup else None,
                speedup_spread=(result.speedup.maximum - result.speedup.minimum) if result.speedup else None,
                lossless=result.lossless,
                metrics=summary["per_set"][result.name],
            )
        )
    return RunSpec(
        run_id=run_id,
        target=request.target,
        drafter=request.drafter,
        status="ok",
        job_id=job_id,
        engine=provenance.get("engine", "pytorch"),
        engine_version=provenance.get("engine_version") or f"torch {provenance.get('torch_version')}",
        target_revision=request.target_revision or provenance.get("target_sha") or provenance.get("target_files_digest"),
        drafter_revision=request.drafter_revision or provenance.get("drafter_sha") or provenance.get("drafter_files_digest"),
        method=run.method,
        draft_length=run.draft_length,
        temperature=float(provenance.get("temperature", 0.0)),
        seed=provenance.get("seed"),
        dtype=provenance.get("dtype"),
        device_name=provenance.get("device"),
        hardware=_hardware(provenance),
        torch_version=provenance.get("torch_version"),
        transformers_version=provenance.get("transformers_version"),
        lossless=run.lossless,
        tau=summary["tau"],
        acceptance_rate=summary["acceptance_rate"],
        baseline_tokens_per_s=summary["baseline_tokens_per_s"],
        tokens_per_s=summary["tokens_per_s"],
        speedup=summary["speedup"],
        efficiency=summary["efficiency"],
        peak_memory_bytes=run.peak_memory_bytes,
        target_weight_bytes=run.target_weight_bytes,
        drafter_weight_bytes=run.drafter_weight_bytes,
        metrics={k: v for k, v in summary.items() if k not in ("provenance", "per_set")} | {"marginal": marginal},
        provenance=provenance,
        sets=tuple(sets),
    )


def failed_spec(request: RunRequest, reason: str, *, job_id: int | None, run_id: str | None) -> RunSpec:
    """A run that did not finish, with its one-line reason and the request that asked for it."""
    return RunSpec(
        run_id=run_id,
        target=request.target,
        drafter=request.drafter,
        status="failed",
        failure_reason=reason,
        job_id=job_id,
        engine=VERIFIER_ENGINES[request.engine],
        target_revision=request.target_revision,
        drafter_revision=request.drafter_revision,
        temperature=float(request.settings.get("temperature", 0.0)),
        seed=request.settings.get("seed"),
        metrics={},
        provenance={"request": request.to_payload()},
    )
