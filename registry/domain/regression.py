"""When a benchmark run is a regression: τ fell against the previous comparable run of the same pair."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from registry.domain.conditions import conditions_of
from registry.domain.names import repo_org
from registry.domain.run import Run

# τ falling by more than this fraction against the previous comparable run is a regression worth an alert.
REGRESSION_FRACTION = 0.10
EVENT_TYPE = "acceptance_regressed"


@dataclass(frozen=True)
class Regression:
    """What an `acceptance_regressed` event says (the store turns it into an EventSpec)."""

    subject: str
    dedupe_key: str
    payload: dict[str, Any] = field(default_factory=dict)
    org: str | None = None
    type: str = EVENT_TYPE


def _conditions(run: Run) -> tuple[Any, ...]:
    found = conditions_of(run)
    return (found.temperature, found.dtype, found.draft_length, found.max_new_tokens, found.prompt_sets, found.model,
            found.metric_version)


def regression(run: Run, recent: Sequence[Run]) -> Regression | None:
    """A regression when τ fell against the newest comparable run in `recent` (newest first).

    Comparable = same target, drafter, engine, hardware, method, prompt sets and measurement conditions
    (registry.domain.conditions: temperature, dtype, draft length, new tokens, test model or checkpoint, metric
    version), whether or not either was lossless (a drafter turning lossy is worth the alert); runs under other
    conditions are a different series and never compared. `recent` is already the pair's ok runs on the same
    engine, hardware and method.
    """
    if run.status != "ok" or run.tau is None or run.drafter is None:
        return None
    wanted = _conditions(run)
    previous = [
        r
        for r in recent
        if r.run_id != run.run_id
        and _conditions(r) == wanted
        and {s.name: s.digest for s in r.per_set} == {s.name: s.digest for s in run.per_set}
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
        org=repo_org(run.drafter),
    )
