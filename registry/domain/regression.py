"""When a benchmark run is a regression: τ fell against the previous comparable run of the same pair.

Pure: it reads runs through a Protocol, so the store's records (a layer above) satisfy it without being imported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

# τ falling by more than this fraction against the previous comparable run is a regression worth an alert.
REGRESSION_FRACTION = 0.10
# Metric definitions (verifier.metrics METRIC_VERSION) a run's numbers were measured under; runs stored before
# versions existed are version 1. An ok run's `metrics` hold, from version 2: "metric_version", "tau_emitted",
# "decode_speedup", "speedup_spread", and "forward_costs" = {"context_length", "gamma", "target_step_s" (T(1)),
# "verify_step_s" (T(γ+1)), "draft_step_s", "repeats", "spread"} (None where the engine cannot time forwards).
FIRST_METRIC_VERSION = 1
EVENT_TYPE = "acceptance_regressed"


class PromptSetRun(Protocol):
    @property
    def prompt_set(self) -> str: ...

    @property
    def prompt_set_digest(self) -> str: ...


class Run(Protocol):
    """The attributes of a stored run the rule reads."""

    @property
    def run_id(self) -> str | None: ...

    @property
    def status(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def drafter(self) -> str | None: ...

    @property
    def target_revision(self) -> str | None: ...

    @property
    def drafter_revision(self) -> str | None: ...

    @property
    def hardware(self) -> str | None: ...

    @property
    def temperature(self) -> float: ...

    @property
    def tau(self) -> float | None: ...

    @property
    def metrics(self) -> Mapping[str, Any]: ...

    @property
    def sets(self) -> Sequence[PromptSetRun]: ...

    @property
    def created_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class Regression:
    """What an `acceptance_regressed` event says (the store turns it into an EventSpec)."""

    subject: str
    dedupe_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    org: str | None = None
    type: str = EVENT_TYPE


def metric_version(run: Run) -> int:
    return int(run.metrics.get("metric_version") or FIRST_METRIC_VERSION)


def regression(run: Run, recent: Sequence[Run]) -> Regression | None:
    """A regression when τ fell against the newest comparable run in `recent` (newest first).

    Comparable = same target, drafter, engine, hardware, method, temperature, prompt sets and metric version; runs
    on other hardware or prompts, or measured under other metric definitions, are a different series and never
    compared. `recent` is already the pair's ok runs on the same engine, hardware and method.
    """
    if run.status != "ok" or run.tau is None or run.drafter is None:
        return None
    previous = [
        r
        for r in recent
        if r.run_id != run.run_id
        and r.temperature == run.temperature
        and metric_version(r) == metric_version(run)
        and {s.prompt_set: s.prompt_set_digest for s in r.sets} == {s.prompt_set: s.prompt_set_digest for s in run.sets}
        and r.tau is not None
        and r.created_at is not None
        and run.created_at is not None
        and r.created_at <= run.created_at
    ]
    if not previous:
        return None
    last = previous[0]
    if run.tau >= last.tau * (1 - REGRESSION_FRACTION):  # type: ignore[operator]
        return None
    changed = []
    if last.target_revision != run.target_revision:
        changed.append(f"target {str(last.target_revision)[:8]} -> {str(run.target_revision)[:8]}")
    if last.drafter_revision != run.drafter_revision:
        changed.append(f"drafter {str(last.drafter_revision)[:8]} -> {str(run.drafter_revision)[:8]}")
    return Regression(
        subject=run.drafter,
        dedupe_key=f"{EVENT_TYPE}:{run.run_id}",
        payload={
            "message": f"τ of {run.drafter} on {run.target} fell {last.tau:.2f} -> {run.tau:.2f}"
            + (f" ({'; '.join(changed)})" if changed else " (no revision changed)"),
            "target": run.target,
            "previous_run": last.run_id,
            "run": run.run_id,
            "previous_tau": last.tau,
            "tau": run.tau,
            "hardware": run.hardware,
        },
        org=run.drafter.split("/", 1)[0] if run.drafter.count("/") == 1 else None,
    )
