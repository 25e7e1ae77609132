"""Autoverify: every new exact pair that fits this worker is planned, queued, downloaded and measured, unattended.

The plan itself is pure (`registry.domain.plan`) over facts the store reads (`registry.store.plan_facts`); this
runner adds what only a worker knows — its device, memory, engines and disk budget — queues the READY rows (one
job per measurement identity, so a re-measure trigger queues once and earlier runs stay as history), and gives the
worker a fetch step that downloads both repos at the pinned shas (`registry.hub.download`) before it measures.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from registry.domain.engines import PYTORCH, VERIFIER_ENGINES
from registry.domain.measurement import RunSettings
from registry.domain.memory import GIB
from registry.domain.plan import READY, PlanRow, WorkerCapability, plan_pairs
from registry.hub import HubClient
from registry.hub.download import Downloader, DownloadFailed
from registry.settings import Settings
from registry.store import Store
from registry.store import jobs as queue
from verifier.jobs import VerifyRequest, enqueue

ENGINE_OPTIONS = {stored: option for option, stored in VERIFIER_ENGINES.items()}
MAX_DEFAULT_BUDGET = 200 * GIB


@dataclass(frozen=True)
class Device:
    name: str  # "cuda: NVIDIA H200" or "cpu"
    memory_bytes: int
    bytes_per_parameter: float  # bfloat16 on CUDA, float32 on CPU (what the runs use)
    dtype: str


def detect_device() -> Device:
    """CUDA's total memory of device 0, else the machine's RAM."""
    try:
        import torch  # the verifier extra
    except ImportError:
        torch = None  # type: ignore[assignment]
    if torch is not None and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return Device(f"cuda: {props.name}", int(props.total_memory), 2.0, "bfloat16")
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return Device("cpu", int(ram), 4.0, "float32")


def engine_versions() -> dict[str, str]:
    """The engines this worker measures with and their versions (a new version is a re-measure trigger)."""
    try:
        import torch  # the verifier extra
    except ImportError:
        return {}  # no engine: the plan says so for every pair
    return {PYTORCH: f"torch {torch.__version__}"}


def default_budget_bytes(root: Path) -> int:
    """Half the free disk where downloads go, at most 200 GB."""
    probe = root
    while not probe.exists():
        probe = probe.parent
    return min(MAX_DEFAULT_BUDGET, shutil.disk_usage(probe).free // 2)


def download_budget(settings: Settings) -> int:
    """The disk budget for downloads: the setting, else half the free disk where they go (at most 200 GB)."""
    if settings.download_budget_gb is not None:
        return round(settings.download_budget_gb * GIB)
    return default_budget_bytes(settings.downloads_dir)


def capability(settings: Settings, worker_id: str, device: Device | None = None,
               engines: dict[str, str] | None = None) -> WorkerCapability:
    device = device or detect_device()
    memory = round(settings.worker_memory_gb * GIB) if settings.worker_memory_gb else device.memory_bytes
    return WorkerCapability(
        worker_id=worker_id, device=device.name, memory_bytes=memory,
        engines=engines if engines is not None else engine_versions(), disk_budget_bytes=download_budget(settings),
        has_token=settings.token_value() is not None, run_bytes_per_parameter=device.bytes_per_parameter,
        blocked_licenses=frozenset(name.lower() for name in settings.autoverify_blocked_licenses),
    )


def make_plan(store: Store, worker: WorkerCapability, *, structural: bool = False) -> list[PlanRow]:
    live = [w.memory_bytes for w in store.workers.live_workers()]
    return plan_pairs(store.plan_facts.plan_inputs(structural=structural, live_memory=live or None), worker)


def run_settings(settings: Settings, worker: WorkerCapability) -> RunSettings:
    """What an autoverify job runs under. On a CUDA worker the device is named, so the job asks its executor for a
    GPU (`verifier.jobs.enqueue`: under Ray a task that asks for none gets CUDA hidden and measures on the CPU)."""
    return RunSettings(max_new_tokens=settings.autoverify_max_new_tokens, repeats=settings.autoverify_repeats,
                       warmup=1, dtype="bfloat16" if worker.run_bytes_per_parameter == 2.0 else "float32",
                       device="cuda" if worker.device.startswith("cuda") else "auto")


def enqueue_ready(store: Store, rows: list[PlanRow], run: RunSettings) -> list[queue.JobRecord]:
    """One job per READY row, keyed by its measurement identity: a second plan queues nothing twice."""
    queued = []
    for row in rows:
        if row.state != READY or row.engine is None or row.key is None:
            continue
        request = VerifyRequest(target=row.target, drafter=row.drafter, target_revision=row.target_sha,
                                drafter_revision=row.drafter_sha, settings=run,
                                engine=ENGINE_OPTIONS[row.engine], download=True)
        job = enqueue(store, request, dedupe_key=row.key, memory_bytes=row.memory_bytes)
        if job is not None:
            queued.append(job)
    return queued


def plan_and_enqueue(store: Store, settings: Settings, worker: WorkerCapability
                     ) -> tuple[list[PlanRow], list[queue.JobRecord]]:
    rows = make_plan(store, worker, structural=settings.autoverify_structural)
    return rows, enqueue_ready(store, rows, run_settings(settings, worker))


def announce(store: Store, worker: WorkerCapability) -> None:
    """State this worker's capabilities (and beat): what `make_plan` and the claim read."""
    store.workers.register_worker(worker, host=socket.gethostname())


def fetcher(downloader: Downloader) -> Callable[[VerifyRequest], tuple[tuple[Path, Path | None], dict[str, Any]]]:
    """The worker's fetch step: both repos at the pinned shas; the bytes and seconds go with the run."""

    def fetch(request: VerifyRequest) -> tuple[tuple[Path, Path | None], dict[str, Any]]:
        if not request.target_revision or not request.drafter or not request.drafter_revision:
            raise DownloadFailed("a download job needs both repos pinned to a sha", retry=False)
        target = downloader.fetch(request.target, request.target_revision,
                                  keep={(request.drafter, request.drafter_revision)})
        drafter = downloader.fetch(request.drafter, request.drafter_revision,
                                   keep={(request.target, request.target_revision)})
        provenance = {"download": {
            "bytes": target.bytes + drafter.bytes, "seconds": round(target.seconds + drafter.seconds, 3),
            "target": {"bytes": target.bytes, "seconds": round(target.seconds, 3)},
            "drafter": {"bytes": drafter.bytes, "seconds": round(drafter.seconds, 3)},
        }}
        return (target.path, drafter.path), provenance

    return fetch


def host_fetcher(store: Store, settings: Settings, budget_bytes: int,
                 on_progress: Callable[[str, int, int], None] | None = None
                 ) -> Callable[[VerifyRequest], tuple[tuple[Path, Path | None], dict[str, Any]]]:
    """The fetch step of a worker on this host: downloads into this host's `downloads_dir` within `budget_bytes`,
    with this host's token (a Ray node fetches for itself, as `drafters up`'s worker does)."""
    client = HubClient(settings.hub_endpoint, settings.token_value(), settings.hub_cache_dir,
                       timeout=max(settings.hub_timeout_s, 60.0))
    return fetcher(Downloader(store, client, settings.downloads_dir, budget_bytes, on_progress=on_progress))
