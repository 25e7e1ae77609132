"""The job queue: leases, heartbeats, retries of lost jobs, exactly-once claiming."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import update

from registry.store import Store, jobs, utcnow
from registry.store.models import Job
from registry.store.records import RunSpec, SetResult
from registry.store.runs import get_run, list_runs, record_run


def _expire(store: Store, job_id: int) -> None:
    with store.session() as session:
        session.execute(update(Job).where(Job.id == job_id).values(lease_expires_at=utcnow() - timedelta(seconds=1)))


def test_claim_finish(store: Store) -> None:
    job = jobs.enqueue(store, "verify", {"target": "t", "drafter": "d"})
    assert job is not None and job.status == jobs.QUEUED
    claimed = jobs.claim(store, "w1")
    assert claimed is not None and claimed.id == job.id and claimed.attempts == 1
    assert jobs.claim(store, "w2") is None
    assert jobs.heartbeat(store, job.id, "w1")
    assert not jobs.heartbeat(store, job.id, "w2")
    assert jobs.finish(store, job.id, "w1", run_id="r1")
    done = jobs.get_job(store, job.id)
    assert done.status == jobs.DONE and done.run_id == "r1"


def test_dedupe_key_enqueues_once(store: Store) -> None:
    assert jobs.enqueue(store, "verify", {}, dedupe_key="pair:a:b") is not None
    assert jobs.enqueue(store, "verify", {}, dedupe_key="pair:a:b") is None
    assert len(jobs.list_jobs(store)) == 1


def test_lost_worker_is_retried_then_failed(store: Store) -> None:
    job = jobs.enqueue(store, "verify", {}, max_attempts=2)
    assert jobs.claim(store, "dead-1") is not None
    _expire(store, job.id)
    again = jobs.claim(store, "w2")
    assert again is not None and again.attempts == 2 and "lost its lease" in again.error
    assert not jobs.finish(store, job.id, "dead-1", run_id=None)  # the dead worker's late answer is refused
    _expire(store, job.id)
    assert jobs.claim(store, "w3") is None
    failed = jobs.get_job(store, job.id)
    assert failed.status == jobs.FAILED and "lease expired" in failed.error


def test_failure_retries_while_attempts_remain(store: Store) -> None:
    job = jobs.enqueue(store, "verify", {}, max_attempts=2)
    jobs.claim(store, "w")
    assert jobs.fail(store, job.id, "w", error="out of memory", retry=True)
    assert jobs.get_job(store, job.id).status == jobs.QUEUED
    jobs.claim(store, "w")
    assert jobs.fail(store, job.id, "w", error="out of memory", retry=True)
    final = jobs.get_job(store, job.id)
    assert final.status == jobs.FAILED and final.error == "out of memory"


def test_concurrent_claims_take_each_job_once(store: Store) -> None:
    for i in range(30):
        jobs.enqueue(store, "verify", {"i": i})
    taken: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        idle = 0
        while idle < 3:
            job = jobs.claim(store, name)
            if job is None:
                idle += 1
                continue
            idle = 0
            with lock:
                taken.append(job.id)
            assert jobs.finish(store, job.id, name, run_id=None)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted(set(taken))
    assert len(taken) == 30
    assert all(j.status == jobs.DONE for j in jobs.list_jobs(store))


def test_runs_round_trip(store: Store) -> None:
    spec = RunSpec(
        target="tiny/target",
        drafter="tiny/dflash",
        method="dflash",
        tau=3.5,
        speedup=1.8,
        lossless=True,
        provenance={"seed": 0},
        metrics={"histogram": [1, 2, 3]},
        sets=(SetResult(prompt_set="code", prompt_set_digest="x", tau=3.5, per_position_acceptance=(0.9, 0.8)),),
    )
    run = record_run(store, spec)
    assert get_run(store, run.run_id) == run
    assert record_run(store, RunSpec(target="tiny/target", drafter=None, run_id=run.run_id)) == run
    assert run.sets[0].per_position_acceptance == (0.9, 0.8)
    failed = record_run(store, RunSpec(target="t", drafter="d", status="failed", failure_reason="out of memory"))
    assert [r.run_id for r in list_runs(store, status="failed")] == [failed.run_id]
    assert len(list_runs(store)) == 2
