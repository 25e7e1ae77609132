"""What the planner reads: every exact pair, every declared one a user can rely on (and, when asked, structural ones)
at both heads with the facts that decide it, what is already measured, the autoverify jobs and the download ledger
— a fixed number of queries, whatever the pair count."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import aliased

from registry.domain import reliance
from registry.domain.plan import (
    DownloadFacts, JobFacts, PairFacts, PlanInputs, PlanRow, SideFacts, WorkerCapability, as_utc, plan_pairs,
)
from registry.store.core import StoreCore
from registry.store.models import (
    BenchmarkRun, Checkpoint, CheckpointRevision, Compatibility, Download, Drafter, DrafterRevision, Job,
)
from registry.store.reads import Reads
from registry.store.workers import Workers

AUTO_PREFIX = "auto:"


def _metric_version() -> Any:
    """Runs stored before metric versions existed are version 1 (as run_aggregates reads them)."""
    return func.coalesce(BenchmarkRun.metrics["metric_version"].as_integer(), 1)


def _config(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class PlanFacts:
    """What the planner reads: the pairs with their facts, the planner's inputs, the live workers' plan."""

    def __init__(self, core: StoreCore, reads: Reads, workers: Workers) -> None:
        self.core = core
        self.reads = reads
        self.workers = workers

    def pair_facts(self, *, structural: bool = False) -> list[PairFacts]:
        """Exact pairs, declared ones a user can rely on (domain/reliance.py: measuring reads the configs the verdict
        could not), and structural ones when asked."""
        verdicts = ("exact", "declared", "structural") if structural else ("exact", "declared")
        publishers = self.reads.trusted_publishers()
        drafter_revision, checkpoint_revision = aliased(DrafterRevision), aliased(CheckpointRevision)
        with self.core.session() as session:
            rows = session.execute(
                select(Compatibility.verdict, Drafter, drafter_revision, Checkpoint, checkpoint_revision)
                .join(drafter_revision, Compatibility.drafter_revision_id == drafter_revision.id)
                .join(Drafter, drafter_revision.drafter_id == Drafter.id)
                .join(checkpoint_revision, Compatibility.checkpoint_revision_id == checkpoint_revision.id)
                .join(Checkpoint, checkpoint_revision.checkpoint_id == Checkpoint.id)
                .where(drafter_revision.sha == Drafter.head_sha, checkpoint_revision.sha == Checkpoint.head_sha,
                       Compatibility.verdict.in_(verdicts))
                .order_by(Compatibility.id)
            ).all()
            pairs = []
            for verdict, drafter, d_rev, checkpoint, c_rev in rows:
                if verdict == "declared" and not reliance.relied_on(verdict, drafter.publisher, checkpoint.repo_id,
                                                                    publishers):
                    continue  # another account's word, unchecked: not downloaded unasked
                pairs.append(PairFacts(
                    drafter=SideFacts(
                        repo_id=drafter.repo_id, sha=d_rev.sha, status=drafter.status,
                        status_detail=drafter.status_detail, gated=bool(drafter.gated), weight_bytes=d_rev.weight_bytes,
                        config=_config(d_rev.config_json), license=d_rev.license,
                    ),
                    target=SideFacts(
                        repo_id=checkpoint.repo_id, sha=c_rev.sha, status=checkpoint.status,
                        status_detail=checkpoint.status_detail, gated=bool(checkpoint.gated),
                        weight_bytes=c_rev.weight_bytes, parameter_count=c_rev.parameter_count,
                        config=_config(c_rev.config_json), size_label=checkpoint.size, license=c_rev.license,
                    ),
                    method=drafter.method, verdict=verdict,
                    source="catalog" if drafter.source == "catalog" else "hub",
                    released=as_utc(drafter.released) if drafter.source == "catalog" else as_utc(
                        d_rev.last_modified or drafter.first_seen),
                ))
            return pairs

    def plan_inputs(self, *, structural: bool = False, live_memory: list[int] | None = None) -> PlanInputs:
        """The planner's facts. `live_memory`: the memory of each live worker, to tell a queued job that fits none."""
        pairs = self.pair_facts(structural=structural)
        with self.core.session() as session:
            measured = frozenset(
                (drafter, drafter_sha, target, target_sha, engine, engine_version, int(metric_version))
                for drafter, drafter_sha, target, target_sha, engine, engine_version, metric_version in session.execute(
                    select(BenchmarkRun.drafter, BenchmarkRun.drafter_revision, BenchmarkRun.target,
                           BenchmarkRun.target_revision, BenchmarkRun.engine, BenchmarkRun.engine_version,
                           _metric_version())
                    .where(BenchmarkRun.status == "ok", BenchmarkRun.drafter.is_not(None))
                    .distinct()
                )
            )
            jobs = {
                key: JobFacts(status, error, fits_a_live_worker=(
                    live_memory is None or memory is None or any(memory <= m for m in live_memory)))
                for key, status, error, memory in session.execute(
                    select(Job.dedupe_key, Job.status, Job.error, Job.memory_bytes)
                    .where(Job.dedupe_key.like(AUTO_PREFIX + "%"))
                )
            }
            downloads = {
                (repo, revision): DownloadFacts(status, done or 0, total)
                for repo, revision, status, done, total in session.execute(
                    select(Download.repo_id, Download.revision, Download.status, Download.bytes_done,
                           Download.bytes_total)
                )
            }
        return PlanInputs(pairs=pairs, measured=measured, jobs=jobs, downloads=downloads)

    def live_plan(self, *, structural: bool = False) -> tuple[list[WorkerCapability], list[PlanRow]]:
        """The live workers (most memory first) and every pair as the first of them plans it; no rows when none is live.
        What the dashboard and the API show; `drafters plan` plans for this machine's own worker instead."""
        workers = self.workers.live_workers()
        if not workers:
            return [], []
        inputs = self.plan_inputs(structural=structural, live_memory=[w.memory_bytes for w in workers])
        return workers, plan_pairs(inputs, workers[0])
