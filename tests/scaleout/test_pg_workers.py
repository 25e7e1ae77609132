"""Worker processes sharing one PostgreSQL queue: every job runs and finishes exactly once, even when a worker is
killed with SIGKILL in the middle of a job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from registry.domain.measurement import RunSettings
from registry.store import jobs as queue
from registry.store import Store
from verifier.jobs import VerifyRequest, enqueue

REPO_ROOT = Path(__file__).resolve().parents[2]
# PostgreSQL only: this is the store several hosts share. Never skipped: the suite's server is always there.
pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)]
CHEAP = RunSettings(max_new_tokens=3, repeats=1, warmup=0, device="cpu")


@dataclass
class WorkerProcess:
    worker_id: str
    process: subprocess.Popen[str]

    def read(self) -> dict[str, object]:
        line = self.process.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise AssertionError(f"{self.worker_id} exited early: {self.process.wait()}")
        return json.loads(line)

    def go(self) -> None:
        self.process.stdin.write("go\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]

    def handled(self) -> list[int]:
        """Jobs this worker finished; waits for it to exit on its own once the queue is done."""
        out, _ = self.process.communicate(timeout=600)
        assert self.process.returncode == 0, f"{self.worker_id} exited with {self.process.returncode}"
        return [json.loads(line)["job"] for line in out.splitlines() if '"job"' in line]


StartWorkers = Callable[..., list[WorkerProcess]]


@pytest.fixture
def start_workers(database_url: str) -> Iterator[StartWorkers]:
    """Starts worker processes on the test's database; each has imported the engine when this returns."""
    started: list[WorkerProcess] = []

    def start(worker_ids: list[str], *options: str) -> list[WorkerProcess]:
        workers = [
            WorkerProcess(worker_id, subprocess.Popen(
                [sys.executable, "-m", "tests.support.worker_process", database_url, worker_id, *options],
                cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            ))
            for worker_id in worker_ids
        ]
        started.extend(workers)
        for worker in workers:
            assert worker.read() == {"ready": worker.worker_id}
        return workers

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    path = tmp_path / "one-prompt.jsonl"
    path.write_text(json.dumps({"prompt": "def add(a, b):"}) + "\n")
    return path


def enqueue_cheap_jobs(store: Store, count: int, target: Path, drafter: Path, prompts: Path) -> list[int]:
    request = VerifyRequest(target=str(target), drafter=str(drafter), prompt_sets=(), prompt_files=(str(prompts),),
                            settings=CHEAP)
    return [enqueue(store, request).id for _ in range(count)]  # type: ignore[union-attr]


def assert_each_job_done_with_one_run(store: Store, job_ids: list[int]) -> None:
    jobs = {job.id: job for job in store.jobs.list_jobs()}
    assert sorted(jobs) == sorted(job_ids)
    assert Counter(job.status for job in jobs.values()) == Counter({queue.DONE: len(job_ids)})
    runs = store.runs.list_runs()
    assert Counter(run.job_id for run in runs) == Counter({job_id: 1 for job_id in job_ids})
    assert all(run.status == "ok" and run.lossless for run in runs)
    assert {run.job_id: run.run_id for run in runs} == {job.id: job.run_id for job in jobs.values()}


def test_four_workers_finish_two_hundred_jobs_exactly_once(
    store: Store, start_workers: StartWorkers, tiny_target_dir: Path, tiny_draft_lm_dir: Path, prompt_file: Path
) -> None:
    job_ids = enqueue_cheap_jobs(store, 200, tiny_target_dir, tiny_draft_lm_dir, prompt_file)
    workers = start_workers([f"w{i}" for i in range(4)])
    for worker in workers:
        worker.go()
    handled = {worker.worker_id: worker.handled() for worker in workers}

    everything = [job_id for jobs in handled.values() for job_id in jobs]
    assert Counter(everything) == Counter({job_id: 1 for job_id in job_ids})  # no job ran twice, none was missed
    assert all(handled.values()), {w: len(jobs) for w, jobs in handled.items()}  # all four shared the queue
    assert_each_job_done_with_one_run(store, job_ids)
    assert {job.attempts for job in store.jobs.list_jobs()} == {1}


def test_job_of_a_worker_killed_mid_job_is_retried_by_another_and_finished_once(
    store: Store, start_workers: StartWorkers, tiny_target_dir: Path, tiny_draft_lm_dir: Path, prompt_file: Path
) -> None:
    job_ids = enqueue_cheap_jobs(store, 12, tiny_target_dir, tiny_draft_lm_dir, prompt_file)
    lease = ("--lease-s", "4", "--heartbeat-s", "0.5")
    [doomed] = start_workers(["doomed"], *lease, "--die-after-run")
    survivors = start_workers(["s1", "s2"], *lease)
    for worker in (doomed, *survivors):
        worker.go()
    # The doomed worker has stored its job's run and not yet marked the job done: kill it there.
    killed_job = int(doomed.read()["ran"])  # type: ignore[call-overload]
    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait()
    handled = {worker.worker_id: worker.handled() for worker in survivors}

    assert sum(job_id == killed_job for jobs in handled.values() for job_id in jobs) == 1
    everything = [job_id for jobs in handled.values() for job_id in jobs]
    assert Counter(everything) == Counter({job_id: 1 for job_id in job_ids})
    retried = store.jobs.get_job(killed_job)
    assert retried.status == queue.DONE and retried.attempts == 2  # type: ignore[union-attr]
    assert "lost its lease" in (retried.error or "")  # type: ignore[union-attr]
    assert_each_job_done_with_one_run(store, job_ids)
