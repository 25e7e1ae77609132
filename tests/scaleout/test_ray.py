"""Verification jobs through the Ray executor on a local Ray instance (2 CPUs, no GPU) and PostgreSQL: the task
stores the same run the local executor would, a job's GPU request becomes a CPU slot on a cluster without GPUs,
and a task whose process is killed sends its job back to the queue to be retried and finished once."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.domain.measurement import RunSettings
from registry.domain.run import Run
from registry.store import jobs as queue
from registry.store import Store
from verifier.jobs import VERIFY, VerifyRequest, Worker, job_run_id
from verifier.ray_executor import TaskResources, task_resources

TASK_TITLE = b"ray::run_verify_job"  # Ray names a worker process after the task it is running


def test_a_job_asks_for_its_gpus_where_the_cluster_has_them_and_a_cpu_slot_where_it_has_none() -> None:
    assert task_resources(job_gpus=1, cluster_gpus=8) == TaskResources(num_cpus=1, num_gpus=1)
    assert task_resources(job_gpus=2, cluster_gpus=8) == TaskResources(num_cpus=1, num_gpus=2)
    assert task_resources(job_gpus=1, cluster_gpus=0) == TaskResources(num_cpus=1, num_gpus=0)
    assert task_resources(job_gpus=0, cluster_gpus=8) == TaskResources(num_cpus=1, num_gpus=0)


def test_a_job_asks_for_the_device_memory_it_needs_where_nodes_declare_theirs() -> None:
    need = task_resources(job_gpus=1, cluster_gpus=8, job_memory_bytes=90 * 2**30 + 1, cluster_memory_gb=1128)
    assert need == TaskResources(num_cpus=1, num_gpus=1, memory_gb=91)
    assert need.as_options()["resources"] == {"gpu_memory_gb": 91}
    # A cluster whose nodes declare no memory is not asked for any: the job would wait forever.
    assert "resources" not in task_resources(job_gpus=1, cluster_gpus=8, job_memory_bytes=2**30).as_options()


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'drafter-registry[ray]'")
    # Ray's session files and logs go to pytest's temporary folders, which pytest prunes, not to /tmp/ray.
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, object_store_memory=100 * 1024 * 1024,
             log_to_driver=False, _temp_dir=str(tmp_path_factory.mktemp("ray")))
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def ray_worker(ray_cluster: object, store: Store, database_url: str) -> Worker:
    from verifier.ray_executor import RayExecutor

    # The executor finds Ray already initialised (by the fixture) and uses that instance.
    return Worker(store, worker_id="ray-worker", heartbeat_s=0.5, lease_s=30.0,
                  executor=RayExecutor(address=None, database_url=database_url))


postgres_only = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


def comparable(run: Run) -> dict[str, object]:
    """What a run must reproduce on the same pair, seed and settings wherever it ran: everything but timings."""
    return {
        "status": run.status,
        "method": run.method,
        "lossless": run.lossless,
        "tau": run.tau,
        "acceptance_rate": run.acceptance_rate,
        "draft_length": run.draft_length,
        "seed": run.seed,
        "temperature": run.temperature,
        "dtype": run.dtype,
        "device_name": run.device_name,
        "target_revision": run.target_revision,
        "drafter_revision": run.drafter_revision,
        "marginal": run.per_position_acceptance,
        "histogram": run.overall.acceptance.histogram,
        "sets": [(s.name, s.digest, s.tau, s.acceptance_rate, s.per_position_acceptance, s.lossless)
                 for s in run.per_set],
        "digests": {k: run.provenance[k] for k in ("target_files_digest", "drafter_files_digest", "prompt_sets_digest")},
    }


def request_of(target: Path, drafter: Path, **settings: object) -> VerifyRequest:
    return VerifyRequest(target=str(target), drafter=str(drafter), prompt_sets=("code",),
                         settings=RunSettings(**{"max_new_tokens": 16, "repeats": 1, "warmup": 0, "seed": 7,
                                                 "device": "cpu", **settings}))


@pytest.mark.postgres
@postgres_only
def test_ray_jobs_land_in_the_database_with_the_local_executors_results(
    store: Store, ray_worker: Worker, tiny_target_dir: Path, tiny_draft_lm_dir: Path
) -> None:
    payload = request_of(tiny_target_dir, tiny_draft_lm_dir).to_payload()
    # Asks for a GPU: on this cluster, which has none, the task gets a CPU slot instead of waiting forever.
    on_ray = store.jobs.enqueue(VERIFY, payload, num_gpus=1)
    done = ray_worker.work_once()
    assert done is not None and done.id == on_ray.id  # type: ignore[union-attr]
    assert done.status == queue.DONE and done.attempts == 1, done.error
    assert done.run_id == job_run_id(on_ray.id)  # type: ignore[union-attr]

    local = store.jobs.enqueue(VERIFY, payload)
    local_done = Worker(store, worker_id="local-worker").work_once()
    assert local_done is not None and local_done.id == local.id and local_done.status == queue.DONE  # type: ignore[union-attr]

    runs = {run.job_id: run for run in store.runs.list_runs()}
    assert sorted(runs) == sorted([on_ray.id, local.id])  # type: ignore[union-attr]
    ray_run, local_run = runs[on_ray.id], runs[local.id]  # type: ignore[union-attr]
    assert ray_run.status == "ok" and ray_run.lossless is True and ray_run.tau > 1.0  # type: ignore[operator]
    assert comparable(ray_run) == comparable(local_run)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _descends_from_us(pid: int) -> bool:
    """Ray's local instance (and so its task processes) was started by this process; another test process's Ray
    instance is not ours to kill."""
    while pid > 1:
        pid = _parent(pid)
        if pid == os.getpid():
            return True
    return False


def task_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes().startswith(TASK_TITLE) and _descends_from_us(int(entry.name)):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
    return found


@pytest.mark.postgres
@postgres_only
def test_a_killed_ray_task_sends_its_job_back_to_the_queue_and_the_retry_finishes_it_once(
    store: Store, ray_worker: Worker, tiny_target_dir: Path, tiny_draft_lm_dir: Path
) -> None:
    # Long enough (seconds) that the task is still running when the test finds its process.
    slow = VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir),
                         prompt_sets=("code", "math", "chat", "multilingual"),
                         settings=RunSettings(max_new_tokens=48, repeats=2, warmup=0, device="cpu"))
    job = store.jobs.enqueue(VERIFY, slow.to_payload())
    outcome: list[queue.JobRecord | None] = []
    first = threading.Thread(target=lambda: outcome.append(ray_worker.work_once()))
    first.start()
    deadline = time.monotonic() + 120
    while not (pids := task_processes()) and first.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(pids) == 1, f"expected one running task process, found {pids}"
    os.kill(pids[0], signal.SIGKILL)
    first.join(timeout=120)

    [requeued] = outcome
    assert requeued is not None and requeued.id == job.id  # type: ignore[union-attr]
    assert requeued.status == queue.QUEUED and requeued.attempts == 1 and requeued.error
    assert store.runs.list_runs() == []  # the task died before storing anything

    finished = ray_worker.work_once()
    assert finished is not None and finished.id == job.id  # type: ignore[union-attr]
    assert finished.status == queue.DONE and finished.attempts == 2, finished.error
    [run] = store.runs.list_runs()
    assert run.job_id == job.id and run.run_id == finished.run_id and run.status == "ok"  # type: ignore[union-attr]
