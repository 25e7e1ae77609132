"""Read-only SELECTs over benchmark runs for the dashboard: pairs, summaries, history, per-position acceptance,
the run list (the rest of the dashboard's aggregates are in aggregates.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, case, func, select

from registry.store.models import BenchmarkRun, RunSetResult
from registry.store.read_only import Rows, fetch_rows

RUN_COLUMNS = [
    "run_id", "created_at", "status", "failure_reason", "method", "hardware", "engine", "engine_version",
    "target_revision", "drafter_revision", "draft_length", "temperature", "dtype", "lossless", "tau",
    "acceptance_rate", "speedup", "tokens_per_s", "baseline_tokens_per_s", "peak_memory_bytes",
    "target_weight_bytes", "drafter_weight_bytes",
]


def condition_columns() -> list[Any]:
    """A run's measurement conditions as labelled SQL columns (registry.domain.conditions: the key of every
    series): temperature, dtype, draft length, new tokens, prompt sets, losslessness, test model or checkpoint,
    metric version. JSON paths read null where a run does not say (older rows)."""
    return [
        BenchmarkRun.temperature.label("temperature"),
        BenchmarkRun.dtype.label("dtype"),
        BenchmarkRun.draft_length.label("draft_length"),
        BenchmarkRun.metrics["settings"]["max_new_tokens"].as_integer().label("max_new_tokens"),
        BenchmarkRun.provenance["prompt_sets_digest"].as_string().label("prompt_sets"),
        BenchmarkRun.lossless.label("lossless"),
        BenchmarkRun.provenance["test_model"].as_boolean().label("test_model"),
        _metric_version().label("metric_version"),
    ]


CONDITION_NAMES = ("temperature", "dtype", "draft_length", "max_new_tokens", "prompt_sets", "lossless", "test_model",
                   "metric_version")


def _metric_version() -> Any:
    """The metric definitions a run was measured under (runs stored before versions existed are version 1)."""
    return func.coalesce(BenchmarkRun.metrics["metric_version"].as_integer(), 1)


def _drafter_is(drafter: str | None) -> Any:
    return BenchmarkRun.drafter.is_(None) if drafter is None else BenchmarkRun.drafter == drafter


class RunRows:
    """The aggregates over benchmark runs, over one read-only engine."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def latest_speedup_rows(self, limit: int) -> Rows:
        """The newest `limit` successful runs: τ, speedup, losslessness, and the conditions they hold for."""
        query = (
            select(BenchmarkRun.target, BenchmarkRun.drafter, BenchmarkRun.method, BenchmarkRun.engine,
                   BenchmarkRun.hardware, *condition_columns(), BenchmarkRun.tau, BenchmarkRun.speedup,
                   BenchmarkRun.provenance["machine_load"]["contended"].as_boolean().label("contended"),
                   BenchmarkRun.created_at)
            .where(BenchmarkRun.status == "ok")
            .order_by(BenchmarkRun.created_at.desc())
            .limit(limit)
        )
        return fetch_rows(self._engine, query)

    # ---- benchmarks ---------------------------------------------------------------------------------

    def benchmark_pair_rows(self) -> Rows:
        """(target, drafter) pairs with runs, most runs first."""
        query = (
            select(
                BenchmarkRun.target,
                BenchmarkRun.drafter,
                func.count().label("runs"),
                func.sum(case((BenchmarkRun.status == "ok", 1), else_=0)).label("ok_runs"),
                func.max(BenchmarkRun.created_at).label("last_run"),
            )
            .group_by(BenchmarkRun.target, BenchmarkRun.drafter)
            .order_by(func.count().desc(), BenchmarkRun.target, BenchmarkRun.drafter)
        )
        return fetch_rows(self._engine, query)

    def benchmark_summary_rows(self, *, target: str | None = None, drafter: str | None = None) -> Rows:
        """Speedup and τ per pair, hardware, engine, conditions (`condition_columns`) and prompt set over successful
        runs: count, mean, mean of the square (`_speedup_sq`, `_tau_sq`: SQLite has no stddev), min, max, and the mean
        within-run spread. Runs under other conditions are other rows, never averaged together."""
        columns = (BenchmarkRun.target, BenchmarkRun.drafter, BenchmarkRun.method, BenchmarkRun.hardware,
                   BenchmarkRun.engine, RunSetResult.prompt_set, *condition_columns())
        query = (
            select(
                *columns,
                func.count().label("runs"),
                func.avg(RunSetResult.speedup).label("speedup_mean"),
                func.avg(RunSetResult.speedup * RunSetResult.speedup).label("_speedup_sq"),
                func.min(RunSetResult.speedup).label("speedup_min"),
                func.max(RunSetResult.speedup).label("speedup_max"),
                func.avg(RunSetResult.speedup_spread).label("speedup_within_run_spread"),
                func.avg(RunSetResult.tau).label("tau_mean"),
                func.avg(RunSetResult.tau * RunSetResult.tau).label("_tau_sq"),
                func.min(RunSetResult.tau).label("tau_min"),
                func.max(RunSetResult.tau).label("tau_max"),
                func.max(BenchmarkRun.created_at).label("last_run"),
            )
            .join(RunSetResult, RunSetResult.run_pk == BenchmarkRun.id)
            .where(BenchmarkRun.status == "ok")
            .group_by(*columns)
            .order_by(*columns)
        )
        if target is not None:
            query = query.where(BenchmarkRun.target == target)
        if drafter is not None:
            query = query.where(BenchmarkRun.drafter == drafter)
        return fetch_rows(self._engine, query)

    def benchmark_history_rows(self, target: str, drafter: str | None) -> Rows:
        """Every successful run of one pair per prompt set, oldest first."""
        query = (
            select(
                BenchmarkRun.run_id, BenchmarkRun.created_at, BenchmarkRun.hardware, BenchmarkRun.engine,
                BenchmarkRun.engine_version, *condition_columns(), RunSetResult.prompt_set,
                RunSetResult.speedup, RunSetResult.speedup_spread, RunSetResult.tau, RunSetResult.tau_spread,
                BenchmarkRun.target_revision, BenchmarkRun.drafter_revision,
            )
            .join(RunSetResult, RunSetResult.run_pk == BenchmarkRun.id)
            .where(BenchmarkRun.status == "ok", BenchmarkRun.target == target, _drafter_is(drafter))
            .order_by(BenchmarkRun.created_at, BenchmarkRun.id, RunSetResult.prompt_set)
        )
        return fetch_rows(self._engine, query)

    def acceptance_rows(self, run_id: str) -> Rows:
        """A run's per-position acceptance list on each prompt set."""
        query = (
            select(RunSetResult.prompt_set, RunSetResult.per_position_acceptance)
            .join(BenchmarkRun, BenchmarkRun.id == RunSetResult.run_pk)
            .where(BenchmarkRun.run_id == run_id)
            .order_by(RunSetResult.prompt_set)
        )
        return fetch_rows(self._engine, query)

    def run_rows(self, *, target: str | None = None, drafter: str | None = None, status: str | None = None,
                 limit: int = 1000) -> Rows:
        """Runs newest first: RUN_COLUMNS, then target and drafter."""
        query = select(*(getattr(BenchmarkRun, name) for name in RUN_COLUMNS), BenchmarkRun.target,
                       BenchmarkRun.drafter)
        if target is not None:
            query = query.where(BenchmarkRun.target == target, _drafter_is(drafter))
        if status is not None:
            query = query.where(BenchmarkRun.status == status)
        return fetch_rows(self._engine,
                          query.order_by(BenchmarkRun.created_at.desc(), BenchmarkRun.id.desc()).limit(limit))
