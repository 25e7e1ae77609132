"""The plan: for every exact pair and every declared one from a trusted publisher (structural ones when a setting
asks), what this worker does about it, and why.

Pure, no I/O: the store gathers the facts (`PairFacts`, what is measured, queued and downloaded), the worker states
what it has (`WorkerCapability`), and `plan_pairs` decides, newest releases first and the catalog backlog after
them. Sizes come from the Hub's metadata the watcher stored (safetensors parameter counts, file sizes), so nothing
is downloaded to decide. Every row carries a state and a one-line reason; only READY rows are queued.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any

from registry.domain.coverage import Coverage, coverage, layout_of
from registry.domain.measurement import METRIC_VERSION
from registry.domain.names import COMMIT_SHA
from registry.domain.memory import binary_size, estimate_parameters, kv_cache_bytes, kv_geometry, stored_bits_per_weight


MEASURED = "measured"
QUEUED = "queued"
RUNNING = "running"
DOWNLOADING = "downloading"
READY = "ready"  # fits this worker: the planner queues it
NEEDS_MEMORY = "needs-memory"
NEEDS_DISK = "needs-disk"
GATED = "gated"
NO_ENGINE = "no-engine"
LICENSE = "license"
GONE = "gone"
FAILED = "failed"
UNKNOWN = "unknown"  # not enough facts yet (no revision, no size)
STATES = (MEASURED, RUNNING, DOWNLOADING, QUEUED, READY, FAILED, NEEDS_MEMORY, NEEDS_DISK, GATED, NO_ENGINE,
          LICENSE, GONE, UNKNOWN)

# What a measurement holds in memory besides the weights: the target's KV cache at this many tokens, activations
# as a fraction of the weights, and a fixed overhead (CUDA context, allocator slack, the Python process).
KV_TOKENS = 4096
ACTIVATION_FRACTION = 0.10
FIXED_OVERHEAD_BYTES = 512 * 2**20
HUB_URL = "https://huggingface.co"


@dataclass(frozen=True)
class SideFacts:
    """One side of a pair at its head revision, as the registry recorded it."""

    repo_id: str
    sha: str | None
    status: str = "ok"  # "gone": deleted from the Hub or no longer readable
    status_detail: str | None = None
    gated: bool = False
    weight_bytes: int | None = None  # safetensors bytes, from the Hub's file metadata
    parameter_count: int | None = None  # from the Hub's safetensors metadata
    config: Mapping[str, Any] | None = None
    size_label: str | None = None
    license: str | None = None


@dataclass(frozen=True)
class PairFacts:
    drafter: SideFacts
    target: SideFacts
    method: str
    verdict: str  # exact / declared (from a trusted publisher: domain/reliance.py) / structural
    source: str  # "hub" (seen by the watcher) or "catalog" (the backlog)
    released: datetime | None = None  # the drafter's release (or first sighting): newest first


@dataclass(frozen=True)
class WorkerCapability:
    worker_id: str
    device: str  # "cuda: NVIDIA H200" or "cpu"
    memory_bytes: int
    engines: Mapping[str, str]  # stored engine name -> its version
    disk_budget_bytes: int
    has_token: bool = False
    run_bytes_per_parameter: float = 4.0  # float32 on CPU, 2 (bfloat16) on CUDA
    blocked_licenses: frozenset[str] = frozenset()


@dataclass(frozen=True)
class JobFacts:
    status: str  # queued / running / done / failed
    error: str | None = None
    fits_a_live_worker: bool = True


@dataclass(frozen=True)
class DownloadFacts:
    status: str  # downloading / complete / failed / evicted
    bytes_done: int = 0
    bytes_total: int | None = None


@dataclass(frozen=True)
class PlanRow:
    drafter: str
    drafter_sha: str | None
    target: str
    target_sha: str | None
    method: str
    verdict: str
    source: str
    state: str
    reason: str
    engine: str | None = None
    engine_version: str | None = None
    memory_bytes: int | None = None
    download_bytes: int | None = None
    key: str | None = None  # the job's dedupe key
    link: str | None = None  # where a person acts (gated access)
    released: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "drafter": self.drafter, "drafter_sha": self.drafter_sha, "target": self.target,
            "target_sha": self.target_sha, "method": self.method, "verdict": self.verdict, "source": self.source,
            "state": self.state, "reason": self.reason, "engine": self.engine, "engine_version": self.engine_version,
            "memory_bytes": self.memory_bytes, "download_bytes": self.download_bytes, "link": self.link,
            "released": self.released.isoformat() if self.released else None,
        }


@dataclass(frozen=True)
class PlanInputs:
    pairs: Sequence[PairFacts]
    measured: frozenset[tuple[str, str, str, str, str, str | None, int]] = frozenset()  # see measurement_identity
    jobs: Mapping[str, JobFacts] = field(default_factory=dict)  # by dedupe key
    downloads: Mapping[tuple[str, str], DownloadFacts] = field(default_factory=dict)  # by (repo id, sha)


def measurement_identity(drafter: str, drafter_sha: str, target: str, target_sha: str, engine: str,
                         engine_version: str | None, metric_version: int = METRIC_VERSION
                         ) -> tuple[str, str, str, str, str, str | None, int]:
    """What makes two runs the same measurement: both shas (a weight change on either side is a new commit), the
    engine and its version, and the metric definitions. A change of any of them is a re-measure trigger."""
    return (drafter, drafter_sha, target, target_sha, engine, engine_version, metric_version)


def dedupe_key(identity: tuple[str, str, str, str, str, str | None, int]) -> str:
    """The job's dedupe key: one job per measurement identity (the column holds 400 characters; ids can be long)."""
    digest = hashlib.sha256("\0".join(str(part) for part in identity).encode()).hexdigest()[:40]
    return f"auto:{digest}"


def parameters(side: SideFacts) -> int | None:
    return estimate_parameters(parameter_count=side.parameter_count, weight_bytes=side.weight_bytes,
                               config=side.config, size_label=side.size_label).parameters


def memory_needed(pair: PairFacts, bytes_per_parameter: float,
                  kv_cache: dict[tuple[str, str | None], int] | None = None) -> int | None:
    """Weights at the run's dtype + the target's KV cache at KV_TOKENS + activations and overhead; None when the
    target's size is unknown. `kv_cache`: KV bytes per target revision, shared across one plan (many drafters
    share a target, and reading its config is most of a pair's cost)."""
    target = parameters(pair.target)
    if target is None:
        return None
    drafter = parameters(pair.drafter) or 0
    weights = round((target + drafter) * bytes_per_parameter)
    key = (pair.target.repo_id, pair.target.sha)
    kv = kv_cache.get(key) if kv_cache is not None else None
    if kv is None:
        geometry = kv_geometry(pair.target.config)
        kv = kv_cache_bytes(geometry, KV_TOKENS, bytes_per_parameter) if geometry is not None else 0
        if kv_cache is not None:
            kv_cache[key] = kv
    return weights + kv + round(weights * ACTIVATION_FRACTION) + FIXED_OVERHEAD_BYTES


def stored_bytes(side: SideFacts) -> int:
    """The side's safetensors bytes from the Hub's file sizes, else its parameters at the stored dtype."""
    if side.weight_bytes is not None:
        return side.weight_bytes
    count = parameters(side)
    return round(count * stored_bits_per_weight(side.config) / 8) if count is not None else 0


def download_needed(pair: PairFacts, downloads: Mapping[tuple[str, str], DownloadFacts]) -> int:
    """Bytes still to fetch: each side's weights unless already downloaded complete."""
    total = 0
    for side in (pair.target, pair.drafter):
        done = downloads.get((side.repo_id, side.sha or ""))
        if done is None or done.status != "complete":
            total += stored_bytes(side)
    return total


def _sort_key(pair: PairFacts) -> tuple[int, float, str, str]:
    released = pair.released.timestamp() if pair.released else 0.0
    return (1 if pair.source == "catalog" else 0, -released, pair.drafter.repo_id, pair.target.repo_id)


def plan_pairs(inputs: PlanInputs, worker: WorkerCapability) -> list[PlanRow]:
    """One row per pair, newest releases first, then the catalog backlog."""
    kv_cache: dict[tuple[str, str | None], int] = {}
    coverage_cache: dict[tuple[str, str], Coverage] = {}
    return [plan_pair(pair, inputs, worker, kv_cache, coverage_cache) for pair in sorted(inputs.pairs, key=_sort_key)]


def plan_pair(pair: PairFacts, inputs: PlanInputs, worker: WorkerCapability,
              kv_cache: dict[tuple[str, str | None], int] | None = None,
              coverage_cache: dict[tuple[str, str], Coverage] | None = None) -> PlanRow:
    """One pair's state and reason. The caches (per plan) hold what depends on one revision only."""
    base = dict(drafter=pair.drafter.repo_id, drafter_sha=pair.drafter.sha, target=pair.target.repo_id,
                target_sha=pair.target.sha, method=pair.method, verdict=pair.verdict, source=pair.source,
                released=pair.released)

    def row(state: str, reason: str, **extra: Any) -> PlanRow:
        return PlanRow(**base, state=state, reason=reason, **extra)

    for side in (pair.drafter, pair.target):
        if side.status == "gone":
            return row(GONE, f"{side.repo_id} is gone from the Hub" + (f" ({side.status_detail})"
                                                                          if side.status_detail else ""))
    # Which engines run the drafter depends on its (method, layout) only: worked out once per plan.
    coverage_key = (pair.method, layout_of(pair.method, pair.drafter.config, pair.drafter.repo_id))
    covered = coverage_cache.get(coverage_key) if coverage_cache is not None else None
    if covered is None:
        covered = coverage(pair.method, pair.drafter.config, pair.drafter.repo_id)
        if coverage_cache is not None:
            coverage_cache[coverage_key] = covered
    engines = [engine for engine in covered.engines if engine in worker.engines]
    if not engines:
        if not covered.engines:
            return row(NO_ENGINE, covered.note() or f"no engine runs {pair.method} drafters")
        return row(NO_ENGINE, f"runs on {', '.join(covered.engines)}, which this worker does not have")
    engine = engines[0]
    version = worker.engines[engine]
    memory = memory_needed(pair, worker.run_bytes_per_parameter, kv_cache)
    download = download_needed(pair, inputs.downloads)
    known: dict[str, Any] = dict(engine=engine, engine_version=version, memory_bytes=memory, download_bytes=download)
    # The catalog may name a repo before the watcher read its commit; downloads and dedupe need the exact sha.
    unpinned = next((side.repo_id for side in (pair.drafter, pair.target)
                     if not side.sha or not COMMIT_SHA.fullmatch(side.sha)), None)
    if unpinned is None:
        identity = measurement_identity(pair.drafter.repo_id, pair.drafter.sha or "", pair.target.repo_id,
                                        pair.target.sha or "", engine, version)
        known["key"] = dedupe_key(identity)
        decided = _known_work(pair, inputs, identity, known["key"], row, known)
        if decided is not None:
            return decided
    gated = [side.repo_id for side in (pair.drafter, pair.target) if side.gated]
    if gated and not worker.has_token:
        return row(GATED, f"gated: {', '.join(gated)} needs a token with granted access (HF_TOKEN)",
                   link=_access_link(pair), **known)
    flagged = [f"{side.repo_id} ({side.license})" for side in (pair.drafter, pair.target)
               if side.license and side.license.lower() in worker.blocked_licenses]
    if flagged:
        return row(LICENSE, f"license flagged: {', '.join(flagged)}", **known)
    if memory is None:
        return row(UNKNOWN, f"size of {pair.target.repo_id} unknown (no safetensors metadata)", **known)
    if memory > worker.memory_bytes:
        return row(NEEDS_MEMORY, f"needs {binary_size(memory)} (this worker has {binary_size(worker.memory_bytes)})", **known)
    if download > worker.disk_budget_bytes:
        return row(NEEDS_DISK, f"needs {binary_size(download)} of disk (download budget {binary_size(worker.disk_budget_bytes)})",
                   **known)
    if unpinned is not None:
        return row(UNKNOWN, f"fits, but no Hub commit of {unpinned} is recorded yet (the watcher records it)",
                   **known)
    return row(READY, f"fits: needs {binary_size(memory)} of {binary_size(worker.memory_bytes)}; {binary_size(download)} to download",
               **known)


def _known_work(pair: PairFacts, inputs: PlanInputs, identity: tuple[str, str, str, str, str, str | None, int],
                key: str, row: Any, known: dict[str, Any]) -> PlanRow | None:
    """A pair already measured, queued, running or failed at this identity; None when there is no such work."""
    engine, version = known["engine"], known["engine_version"]
    if identity in inputs.measured:
        return row(MEASURED, f"measured on {engine} ({version}) at these revisions", **known)
    job = inputs.jobs.get(key)
    if job is None:
        return None
    if job.status == "done":
        return row(MEASURED, "measured (its job is done)", **known)
    if job.status == "failed":
        error = job.error or "failed"
        if error.lower().startswith("gated"):
            return row(GATED, error, link=_access_link(pair), **known)
        if error.lower().startswith("gone"):
            return row(GONE, error, **known)
        return row(FAILED, error, **known)
    if job.status == "running":
        progress = [inputs.downloads.get((side.repo_id, side.sha or "")) for side in (pair.target, pair.drafter)]
        active = [d for d in progress if d is not None and d.status == "downloading"]
        if active:
            done = sum(d.bytes_done for d in active)
            total = sum(d.bytes_total or 0 for d in active)
            return row(DOWNLOADING, f"downloading: {binary_size(done)} of {binary_size(total)}", **known)
        return row(RUNNING, "measuring", **known)
    if not job.fits_a_live_worker:
        return row(QUEUED, "queued; fits no live worker", **known)
    return row(QUEUED, "queued", **known)


def _access_link(pair: PairFacts) -> str:
    gated = next((side for side in (pair.drafter, pair.target) if side.gated), pair.target)
    return f"{HUB_URL}/{gated.repo_id}"


def counts(rows: Iterable[PlanRow]) -> dict[str, int]:
    totals = {state: 0 for state in STATES}
    for item in rows:
        totals[item.state] = totals.get(item.state, 0) + 1
    return {state: count for state, count in totals.items() if count}


def as_utc(value: datetime | date | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
