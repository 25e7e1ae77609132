"""How many verification jobs per second worker processes claim from the PostgreSQL queue: 1, 2, 4 and 8 workers.

    .venv/bin/python bench/job_queue.py [--jobs N] [--workers 1,2,4,8] [--admin-url URL]

Each job is empty: a worker claims it (`SELECT … FOR UPDATE SKIP LOCKED`, a lease) and marks it done at once, so
the rate is the queue's own cost, the whole of what a worker spends per job outside the job itself. Every round
gets a fresh database on the server at --admin-url (default: the test suite's, DRAFTERS_TEST_PG_URL); the
workers start together behind a barrier and the clock runs until the last job is done. Each round also checks
that every job was claimed exactly once. The last column is the queue's share of a worker's time when each job
is a GPU run of REFERENCE_JOB_S seconds: claiming is no bottleneck while it stays far below 1%.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass

from registry.store import Store
from registry.store.db import scratch_database
from registry.store import jobs as queue

KIND = "bench"
REFERENCE_JOB_S = 120.0  # a short GPU benchmark: two minutes
DEFAULT_ADMIN_URL = os.environ.get(
    "DRAFTERS_TEST_PG_URL", "postgresql+psycopg://drafters:drafters@127.0.0.1:5432/postgres"
)


@dataclass(frozen=True)
class Round:
    workers: int
    jobs: int
    seconds: float
    claimed_once: bool

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds


def _drain(url: str, worker_id: str, ready: multiprocessing.synchronize.Barrier, results) -> None:  # type: ignore[no-untyped-def]
    store = Store.open(url)
    claimed: list[int] = []
    ready.wait()
    while (job := store.jobs.claim(worker_id, kinds=(KIND,))) is not None:
        store.jobs.finish(job.id, worker_id, run_id=None)
        claimed.append(job.id)
    results.put(claimed)
    store.engine.dispose()


def _with_database(admin_url: str, action):  # type: ignore[no-untyped-def]
    with scratch_database(admin_url, "drafters_bench") as url:
        return action(url)


def run_round(url: str, workers: int, jobs: int) -> Round:
    store = Store.open(url)
    for _ in range(jobs):
        store.jobs.enqueue(KIND, {})
    store.engine.dispose()
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(workers + 1)
    results = context.Queue()
    processes = [context.Process(target=_drain, args=(url, f"bench-{i}", ready, results)) for i in range(workers)]
    for process in processes:
        process.start()
    ready.wait()  # every worker is connected; the clock starts now
    started = time.perf_counter()
    claimed = [job_id for _ in processes for job_id in results.get()]
    seconds = time.perf_counter() - started
    for process in processes:
        process.join()
    store = Store.open(url)
    done = len(store.jobs.list_jobs(status=queue.DONE))
    store.engine.dispose()
    return Round(workers, jobs, seconds, claimed_once=len(claimed) == len(set(claimed)) == done == jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    rounds = [_with_database(args.admin_url, lambda url, n=n: run_round(url, n, args.jobs)) for n in counts]
    reference = rounds[0].jobs_per_s
    print(f"PostgreSQL job queue, {args.jobs} empty jobs a round, {os.cpu_count()} CPU cores")
    print(f"{'workers':>7} {'seconds':>8} {'jobs/s':>8} {'vs 1st':>7} {'ms/job/worker':>14} "
          f"{'queue share of a ' + str(int(REFERENCE_JOB_S)) + ' s job':>28} {'claimed once':>13}")
    for result in rounds:
        per_job_per_worker_s = result.seconds * result.workers / result.jobs
        share = per_job_per_worker_s / (per_job_per_worker_s + REFERENCE_JOB_S)
        print(f"{result.workers:>7} {result.seconds:>8.2f} {result.jobs_per_s:>8.0f} "
              f"{result.jobs_per_s / reference:>6.2f}x {per_job_per_worker_s * 1000:>14.1f} {share:>28.5%} "
              f"{'yes' if result.claimed_once else 'NO':>13}")
    if not all(r.claimed_once for r in rounds):
        sys.exit("a job was claimed twice or not at all")


if __name__ == "__main__":
    main()
