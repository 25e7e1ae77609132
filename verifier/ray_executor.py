"""Runs claimed verification jobs as Ray tasks, so Ray places each on a host with the GPUs it asks for.

The worker that claimed a job keeps its lease alive (heartbeats) while it waits for the task; the task opens the
database itself and stores the run under the job's fixed run id, so a retried task stores it once. A task that
dies (its process killed, its host gone) raises in the worker, which fails the job with retry: the job goes back
to the queue, exactly as if a local worker had lost its lease. Ray stays optional: this is the only module that
imports it.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any

from registry.errors import UserError
from registry.store import jobs as queue
from registry.domain.run import Run
from registry.settings import get_settings
from registry.store import Store
from verifier.autoverify import download_budget, host_fetcher
from verifier.jobs import VerifyRequest, job_run_id, verify_now


class RayUnavailable(UserError, RuntimeError):
    """Ray is not installed, or the cluster cannot be reached; the message says which and what to do."""


# The custom Ray resource a node declares for its device memory (`ray start --resources='{"gpu_memory_gb": 141}'`):
# a job that needs N GB then lands only on a node that has them.
GPU_MEMORY_RESOURCE = "gpu_memory_gb"


@dataclass(frozen=True)
class TaskResources:
    num_cpus: float
    num_gpus: float
    memory_gb: float = 0.0  # of GPU_MEMORY_RESOURCE; 0: not asked for

    def as_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.memory_gb:
            options["resources"] = {GPU_MEMORY_RESOURCE: self.memory_gb}
        return options


def task_resources(job_gpus: int, cluster_gpus: float, *, job_memory_bytes: int | None = None,
                   cluster_memory_gb: float = 0.0) -> TaskResources:
    """What a job's task asks Ray for: its GPUs where the cluster has any, else one CPU slot (a CPU-only cluster
    runs the job on CPU rather than waiting forever for a GPU that will never come); and the device memory the
    plan says it needs, where the cluster's nodes declare theirs (none declared: not asked, never stuck)."""
    memory_gb = math.ceil(job_memory_bytes / 2**30) if job_memory_bytes and cluster_memory_gb > 0 else 0.0
    if job_gpus > 0 and cluster_gpus > 0:
        return TaskResources(num_cpus=1, num_gpus=job_gpus, memory_gb=memory_gb)
    return TaskResources(num_cpus=1, num_gpus=0, memory_gb=memory_gb)


def run_verify_job(database_url: str, payload: dict[str, Any], job_id: int, run_id: str) -> str:
    """The Ray task: run the job's request on this host and store the run; returns the stored run's id."""
    store = Store.open(database_url)
    try:
        request = VerifyRequest.from_payload(payload)
        if not request.download:
            return verify_now(store, request, job_id=job_id, run_id=run_id).run_id  # type: ignore[return-value]
        # An autoverify job: the node downloads both repos at the pinned shas into its own downloads folder.
        settings = get_settings()
        fetch = host_fetcher(store, settings, download_budget(settings))
        folders, provenance = fetch(request)
        return verify_now(store, request, job_id=job_id, run_id=run_id, folders=folders,  # type: ignore[return-value]
                          provenance=provenance).run_id
    finally:
        store.engine.dispose()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("the Ray executor needs Ray: pip install 'drafter-registry[ray]'") from None
    return ray


class RayExecutor:
    """`Worker.executor` that hands each claimed job to a Ray cluster and waits for its run."""

    def __init__(self, *, address: str | None, database_url: str) -> None:
        self._ray = _import_ray()
        # Ray started here (a local instance: gcs_server, raylet, its workers) is this process's to stop; an
        # instance someone else initialised in this process is theirs.
        self._owns_ray = not self._ray.is_initialized()
        if self._owns_ray:
            try:
                # address None: RAY_ADDRESS if set, else a local Ray instance of this machine.
                self._ray.init(address=address, log_to_driver=False)
            except ConnectionError as error:
                raise RayUnavailable(
                    f"cannot reach the Ray cluster at {address or 'RAY_ADDRESS'}: {' '.join(str(error).split())} "
                    "(is `ray start` running there, with the same RAY_AUTH_MODE and token as this machine?)"
                ) from None
        self._database_url = database_url
        # No Ray-level retries: a dead task is the queue's business (attempts are counted there, once).
        self._task = self._ray.remote(max_retries=0)(run_verify_job)

    def close(self) -> None:
        """Stop the Ray instance this executor started (a cluster it only connected to keeps running)."""
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()

    def resources(self, job: queue.JobRecord) -> TaskResources:
        cluster = self._ray.cluster_resources()
        return task_resources(job.num_gpus, float(cluster.get("GPU", 0)), job_memory_bytes=job.memory_bytes,
                              cluster_memory_gb=float(cluster.get(GPU_MEMORY_RESOURCE, 0)))

    def __call__(self, store: Store, job: queue.JobRecord) -> Run:
        reference = self._task.options(**self.resources(job).as_options()).remote(
            self._database_url, job.payload, job.id, job_run_id(job.id)
        )
        # Raises (a Ray error) when the task's process or host dies: the worker then requeues the job.
        run_id = self._ray.get(reference)
        record = store.runs.get_run(run_id)
        if record is None:
            raise RuntimeError(f"the Ray task of job {job.id} finished but its run {run_id} is not in the database")
        return record
