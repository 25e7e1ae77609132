"""The plan page's DataFrames: every exact pair as the live workers see it (measured, queued, downloading, needs N
GiB, gated, no engine — with the reason), and the service's downloads. Read-only: the store's reads over the
dashboard's read-only queries, planned with the pure `registry.domain.plan`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dashboard.page_cache import LIVE_TTL_S, kept
from registry.domain.plan import WorkerCapability, counts
from registry.store.read_queries import ReadOnlyQueries

PLAN_COLUMNS = ["state", "drafter", "target", "reason", "link", "memory_gib", "download_gib", "engine",
                "drafter_sha", "target_sha", "source"]
DOWNLOAD_COLUMNS = ["repo_id", "revision", "status", "done_gib", "total_gib", "seconds", "error", "last_used_at"]


@dataclass(frozen=True)
class PlanView:
    worker: WorkerCapability | None  # the live worker with the most memory; None: no worker is live
    workers: int
    counts: dict[str, int]
    pairs: pd.DataFrame
    downloads: pd.DataFrame


def _gib(value: object) -> float | None:
    return None if value is None else round(float(value) / 2**30, 2)  # type: ignore[arg-type]


@kept(LIVE_TTL_S)  # downloads move: kept for less
def plan_view(db: ReadOnlyQueries, *, structural: bool = False) -> PlanView:
    store = db.store
    workers, rows = store.plan_facts.live_plan(structural=structural)
    downloads = pd.DataFrame(
        [{"repo_id": d.repo_id, "revision": d.revision[:12], "status": d.status, "done_gib": _gib(d.bytes_done),
          "total_gib": _gib(d.bytes_total), "seconds": d.seconds, "error": d.error, "last_used_at": d.last_used_at}
         for d in reversed(store.downloads.list_downloads())], columns=DOWNLOAD_COLUMNS)
    if not workers:
        return PlanView(None, 0, {}, pd.DataFrame(columns=PLAN_COLUMNS), downloads)
    worker = workers[0]
    pairs = pd.DataFrame([{**row.to_json(), "memory_gib": _gib(row.memory_bytes), "download_gib": _gib(row.download_bytes),
                           "drafter_sha": (row.drafter_sha or "")[:12], "target_sha": (row.target_sha or "")[:12]}
                          for row in rows], columns=PLAN_COLUMNS)
    return PlanView(worker, len(workers), counts(rows), pairs, downloads)
