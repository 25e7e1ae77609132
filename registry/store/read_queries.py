"""The dashboard's one handle on the database: `ReadOnlyQueries(url)` owns a read-only engine (read_only.py) and
answers in plain rows (aggregates.py, run_aggregates.py) and records, so that no caller outside the store holds an
Engine or a Session.

`store` is a `Store` over the same read-only connections, for the registry's own reads that take one (reports,
calibration, the plan's facts); a write through it fails at the connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from registry.domain.curve import SpeedupCurve
from registry.store import Store, aggregates, run_aggregates, service_aggregates
from registry.store.read_only import Rows, open_read_only, schema_problem


class ReadOnlyQueries:
    """Every read the dashboard makes, over one read-only engine per database URL."""

    def __init__(self, url: str) -> None:
        self._engine = open_read_only(url)
        self.store = Store(self._engine)

    def close(self) -> None:
        self._engine.dispose()

    def schema_problem(self) -> str | None:
        """Why this database cannot be read, or None when its schema is current."""
        return schema_problem(self._engine)

    # ---- registry: checkpoints, drafters, verdicts, events ------------------------------------------------------

    def counts_row(self) -> dict[str, Any]:
        return aggregates.counts_row(self._engine)

    def service_rows(self) -> Rows:
        return service_aggregates.service_rows(self._engine)

    def speedup_curves(self, limit: int = 100) -> list[SpeedupCurve]:
        return self.store.curves.curves(limit=limit)

    def job_state_rows(self) -> Rows:
        return service_aggregates.job_state_rows(self._engine)

    def event_rows(self, *, types: Sequence[str] = (), orgs: Sequence[str] = (), families: Sequence[str] = (),
                   since: date | None = None, limit: int = 500) -> Rows:
        return aggregates.event_rows(self._engine, types=types, orgs=orgs, families=families, since=since,
                                     limit=limit)

    def event_option_rows(self) -> list[tuple[str, ...]]:
        return aggregates.event_option_rows(self._engine)

    def checkpoint_option_rows(self) -> list[tuple[str, ...]]:
        return aggregates.checkpoint_option_rows(self._engine)

    def availability_rows(self, *, orgs: Sequence[str] = (), families: Sequence[str] = (),
                          sizes: Sequence[str] = ()) -> tuple[Rows, Rows]:
        return aggregates.availability_rows(self._engine, orgs=orgs, families=families, sizes=sizes)

    def resolve_checkpoint(self, repo_id: str) -> str | None:
        return aggregates.resolve_checkpoint(self._engine, repo_id)

    def search_checkpoints(self, text: str, limit: int = 20) -> list[str]:
        return aggregates.search_checkpoints(self._engine, text, limit)

    def drafters_for_rows(self, repo_id: str) -> Rows:
        return aggregates.drafters_for_rows(self._engine, repo_id)

    def dflash_v1_rows(self) -> Rows:
        return aggregates.dflash_v1_rows(self._engine)

    def pair_choice_rows(self) -> tuple[Rows, Rows]:
        return aggregates.pair_choice_rows(self._engine)

    def pair_verdict_row(self, target: str, drafter: str) -> dict[str, Any] | None:
        return aggregates.pair_verdict_row(self._engine, target, drafter)

    def hub_status_rows(self, target: str, drafter: str) -> list[dict[str, Any]]:
        return aggregates.hub_status_rows(self._engine, target, drafter)

    def checkpoint_revision_rows(self, repo_id: str) -> Rows:
        return aggregates.checkpoint_revision_rows(self._engine, repo_id)

    def drafter_revision_rows(self, repo_id: str) -> Rows:
        return aggregates.drafter_revision_rows(self._engine, repo_id)

    def checkpoint_weight_row(self, repo_id: str) -> dict[str, Any] | None:
        return aggregates.checkpoint_weight_row(self._engine, repo_id)

    def drafter_weight_row(self, repo_id: str) -> dict[str, Any] | None:
        return aggregates.drafter_weight_row(self._engine, repo_id)

    # ---- benchmark runs ------------------------------------------------------------------------------------------

    def latest_speedup_rows(self, limit: int) -> Rows:
        return run_aggregates.latest_speedup_rows(self._engine, limit)

    def benchmark_pair_rows(self) -> Rows:
        return run_aggregates.benchmark_pair_rows(self._engine)

    def benchmark_summary_rows(self, *, target: str | None = None, drafter: str | None = None) -> Rows:
        return run_aggregates.benchmark_summary_rows(self._engine, target=target, drafter=drafter)

    def benchmark_history_rows(self, target: str, drafter: str | None) -> Rows:
        return run_aggregates.benchmark_history_rows(self._engine, target, drafter)

    def acceptance_rows(self, run_id: str) -> Rows:
        return run_aggregates.acceptance_rows(self._engine, run_id)

    def run_rows(self, *, target: str | None = None, drafter: str | None = None, status: str | None = None,
                 limit: int = 1000) -> Rows:
        return run_aggregates.run_rows(self._engine, target=target, drafter=drafter, status=status, limit=limit)
