"""A verification worker in its own process, for tests that run several of them against one database.

    python -m tests.support.worker_process DATABASE_URL WORKER_ID [--lease-s S] [--heartbeat-s S] [--die-after-run]

It imports the engine, prints `{"ready": WORKER_ID}`, and waits for a line on stdin so that every worker of a test
starts claiming at the same moment. Then it works until no job is queued or running, printing one JSON line per
job it handled: `{"job": ID, "status": ...}`. With --die-after-run it runs the first job it claims (the run is
stored), prints `{"ran": ID}` and hangs while still holding the job's lease, so a test can SIGKILL it mid-job.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

import torch

from registry.domain.run import Run
from registry.store import Store
from registry.store import jobs as queue
from verifier.engines import pytorch as engine  # noqa: F401 - imported before "ready" so that every worker starts warm
from verifier.jobs import Worker

IDLE_S = 0.2


def say(message: dict[str, object]) -> None:
    print(json.dumps(message), flush=True)


def unfinished(store: Store) -> bool:
    return bool(store.jobs.list_jobs(status=queue.QUEUED, limit=1) or store.jobs.list_jobs(status=queue.RUNNING,
                                                                                           limit=1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("database_url")
    parser.add_argument("worker_id")
    parser.add_argument("--lease-s", type=float, default=60.0)
    parser.add_argument("--heartbeat-s", type=float, default=1.0)
    parser.add_argument("--die-after-run", action="store_true")
    args = parser.parse_args()
    # Several workers share 2 cores: one thread each, or OpenMP threads spin against each other.
    torch.set_num_threads(1)
    store = Store.open(args.database_url)
    worker = Worker(store, worker_id=args.worker_id, lease_s=args.lease_s, heartbeat_s=args.heartbeat_s)
    if args.die_after_run:

        def run_then_hang(_store: Store, job: queue.JobRecord) -> Run:
            worker.run_job(job)
            say({"ran": job.id})
            threading.Event().wait()  # the heartbeat thread keeps the lease alive until the process is killed
            raise AssertionError("unreachable")

        worker.executor = run_then_hang
    say({"ready": args.worker_id})
    sys.stdin.readline()
    while True:
        job = worker.work_once()
        if job is not None:
            say({"job": job.id, "status": job.status})
        elif not unfinished(store):
            return
        else:
            threading.Event().wait(IDLE_S)  # a job is still running elsewhere: its lease may yet run out


if __name__ == "__main__":
    main()
