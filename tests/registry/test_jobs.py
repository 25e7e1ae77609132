"""The job queue: leases, heartbeats, retries of lost jobs, exactly-once claiming."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import select, update

from registry.store import Store, jobs, utcnow
from registry.store.models import BenchmarkRun, Job
from registry.domain.run import Run
from tests.registry.run_fixtures import full_run, measured


def _expire(store: Store, job_id: int) -> None:
    with store.session() as session:
        session.execute(update(Job).where(Job.id == job_id).values(lease_expires_at=utcnow() - timedelta(seconds=1)))


def test_claim_finish(store: Store) -> None:
    job = store.jobs.enqueue("verify", {"target": "t", "drafter": "d"})
    assert job is not None and job.status == jobs.QUEUED
    claimed = store.jobs.claim("w1")
    assert claimed is not None and claimed.id == job.id and claimed.attempts == 1
    assert store.jobs.claim("w2") is None
    assert store.jobs.heartbeat(job.id, "w1")
    assert not store.jobs.heartbeat(job.id, "w2")
    assert store.jobs.finish(job.id, "w1", run_id="r1")
    done = store.jobs.get_job(job.id)
    assert done.status == jobs.DONE and done.run_id == "r1"


def test_dedupe_key_enqueues_once(store: Store) -> None:
    assert store.jobs.enqueue("verify", {}, dedupe_key="pair:a:b") is not None
    assert store.jobs.enqueue("verify", {}, dedupe_key="pair:a:b") is None
    assert len(store.jobs.list_jobs()) == 1


def test_lost_worker_is_retried_then_failed(store: Store) -> None:
    job = store.jobs.enqueue("verify", {}, max_attempts=2)
    assert store.jobs.claim("dead-1") is not None
    _expire(store, job.id)
    again = store.jobs.claim("w2")
    assert again is not None and again.attempts == 2 and "lost its lease" in again.error
    assert not store.jobs.finish(job.id, "dead-1", run_id=None)  # the dead worker's late answer is refused
    _expire(store, job.id)
    assert store.jobs.claim("w3") is None
    failed = store.jobs.get_job(job.id)
    assert failed.status == jobs.FAILED and "lease expired" in failed.error


def test_failure_retries_while_attempts_remain(store: Store) -> None:
    job = store.jobs.enqueue("verify", {}, max_attempts=2)
    store.jobs.claim("w")
    assert store.jobs.fail(job.id, "w", error="out of memory", retry=True)
    assert store.jobs.get_job(job.id).status == jobs.QUEUED
    store.jobs.claim("w")
    assert store.jobs.fail(job.id, "w", error="out of memory", retry=True)
    final = store.jobs.get_job(job.id)
    assert final.status == jobs.FAILED and final.error == "out of memory"


def test_concurrent_claims_take_each_job_once(store: Store) -> None:
    for i in range(30):
        store.jobs.enqueue("verify", {"i": i})
    taken: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        idle = 0
        while idle < 3:
            job = store.jobs.claim(name)
            if job is None:
                idle += 1
                continue
            idle = 0
            with lock:
                taken.append(job.id)
            assert store.jobs.finish(job.id, name, run_id=None)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(taken) == sorted(set(taken))
    assert len(taken) == 30
    assert all(j.status == jobs.DONE for j in store.jobs.list_jobs())


def test_runs_round_trip(store: Store) -> None:
    spec = Run(
        target="tiny/target",
        drafter="tiny/dflash",
        method="dflash",
        lossless=True,
        provenance={"seed": 0, "histogram": [1, 2, 3]},
        overall=measured(tau=3.5, speedup=1.8),
        per_set=(measured("code", "x", tau=3.5, marginal=(0.9, 0.8)),),
    )
    run = store.runs.record_run(spec)
    assert store.runs.get_run(run.run_id) == run
    assert store.runs.record_run(Run(target="tiny/target", drafter=None, run_id=run.run_id)) == run
    assert (run.tau, run.speedup, run.lossless) == (3.5, 1.8, True)
    assert run.per_set[0].per_position_acceptance == (0.9, 0.8)
    assert run.per_position_acceptance == (0.9, 0.8)  # no pooled rates: the first set's
    failed = store.runs.record_run(Run(target="t", drafter="d", status="failed", failure_reason="out of memory"))
    assert [r.run_id for r in store.runs.list_runs(status="failed")] == [failed.run_id]
    assert len(store.runs.list_runs()) == 2


def test_a_run_reads_back_as_it_was_recorded_with_every_part(store: Store) -> None:
    """Every part of a run (settings, spreads, throughput, acceptance, forward costs, divergence, prediction,
    per-set measurements) survives the store: what comes back equals what went in."""
    spec = full_run(run_id="full-run")
    run = store.runs.record_run(spec)
    assert run == spec
    assert store.runs.get_run("full-run") == spec
    assert [r.run_id for r in store.runs.list_runs()] == ["full-run"]
    # The SQL columns are copies of the measurement, for queries.
    with store.session() as session:
        row = session.scalar(select(BenchmarkRun).where(BenchmarkRun.run_id == "full-run"))
        assert row is not None
        assert (row.tau, row.acceptance_rate, row.speedup, row.tokens_per_s, row.baseline_tokens_per_s) == (
            spec.tau, spec.acceptance_rate, spec.speedup, spec.tokens_per_s, spec.baseline_tokens_per_s)
        assert (row.temperature, row.seed, row.dtype, row.efficiency) == (0.0, 7, "float32", 0.75)
        assert [(r.prompt_set, r.prompt_set_digest, r.tau, r.speedup) for r in row.set_results] == [
            (s.name, s.digest, s.tau, s.speedup.median) for s in spec.per_set]


def test_a_restarted_worker_fails_its_orphan_that_was_on_its_last_attempt(store: Store) -> None:
    job = store.jobs.enqueue("verify", {}, max_attempts=1)
    assert job is not None and store.jobs.claim("w", lease_s=600.0) is not None
    assert store.jobs.release_own("w") == [job.id]
    failed = store.jobs.get_job(job.id)
    assert failed is not None and failed.status == jobs.FAILED
    assert failed.error == "its worker restarted during the last allowed attempt"
    assert store.jobs.claim("w") is None
