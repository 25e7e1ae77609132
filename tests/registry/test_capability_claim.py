"""Workers claim only jobs that fit them (the capability is part of the claim's query, on SQLite and PostgreSQL);
a job that fits no live worker is never claimed and is shown as such."""

from __future__ import annotations

import threading

from registry.domain.memory import GIB
from registry.domain.plan import WorkerCapability
from registry.store import Store
from registry.store import jobs as queue


def test_a_worker_claims_only_what_fits_its_memory_and_engines(store: Store) -> None:
    big = store.jobs.enqueue("verify", {"n": 1}, dedupe_key="auto:big", memory_bytes=80 * GIB, engine="pytorch")
    gguf = store.jobs.enqueue("verify", {"n": 2}, dedupe_key="auto:gguf", memory_bytes=GIB, engine="llama.cpp")
    small = store.jobs.enqueue("verify", {"n": 3}, dedupe_key="auto:small", memory_bytes=GIB, engine="pytorch")
    manual = store.jobs.enqueue("verify", {"n": 4})
    assert big and gguf and small and manual
    claimed = []
    while (job := store.jobs.claim("cpu-worker", memory_bytes=16 * GIB, engines=("pytorch",))) is not None:
        claimed.append(job.id)
    assert claimed == [small.id, manual.id]
    assert store.jobs.get_job(big.id).status == queue.QUEUED  # type: ignore[union-attr]
    assert store.jobs.get_job(big.id).attempts == 0  # type: ignore[union-attr]  # never claimed, never failed
    # A worker that has the memory takes it.
    assert store.jobs.claim("gpu-worker", memory_bytes=141 * GIB, engines=("pytorch",)).id == big.id  # type: ignore[union-attr]


def test_a_job_that_fits_no_live_worker_is_shown_as_such(store: Store) -> None:
    store.workers.register_worker(WorkerCapability("cpu-worker", "cpu", 16 * GIB, {"pytorch": "torch 2"}, 10 * GIB),
                                  host="h")
    store.jobs.enqueue("verify", {}, dedupe_key="auto:big", memory_bytes=80 * GIB, engine="pytorch")
    store.jobs.enqueue("verify", {}, dedupe_key="auto:small", memory_bytes=GIB, engine="pytorch")
    [worker] = store.workers.live_workers()
    assert worker.device == "cpu" and worker.engines == {"pytorch": "torch 2"}
    inputs = store.plan_facts.plan_inputs(live_memory=[w.memory_bytes for w in store.workers.live_workers()])
    assert inputs.jobs["auto:big"].fits_a_live_worker is False
    assert inputs.jobs["auto:small"].fits_a_live_worker is True
    assert store.workers.live_workers(within_s=-1) == []  # nobody beat in the future: nobody is live


def test_the_download_ledger(store: Store) -> None:
    store.downloads.start_download("org/a", "a" * 40, "/d/a", 100)
    store.downloads.progress("org/a", "a" * 40, 40)
    row = store.downloads.get_download("org/a", "a" * 40)
    assert row is not None and (row.status, row.bytes_done, row.bytes_total) == ("downloading", 40, 100)
    store.downloads.finish_download("org/a", "a" * 40, bytes_done=100, seconds=1.5)
    store.downloads.start_download("org/b", "b" * 40, "/d/b", 10)
    store.downloads.finish_download("org/b", "b" * 40, bytes_done=3, seconds=0.1, error="disk full")
    store.downloads.touch("org/a", "a" * 40)
    assert [(r.repo_id, r.status) for r in store.downloads.list_downloads()] == [("org/b", "failed"),
                                                                                ("org/a", "complete")]
    store.downloads.mark_evicted("org/a", "a" * 40)
    assert store.downloads.get_download("org/a", "a" * 40).status == "evicted"  # type: ignore[union-attr]
    assert store.plan_facts.plan_inputs().downloads[("org/b", "b" * 40)].status == "failed"


def test_two_parts_stating_the_same_worker_at_once_both_succeed(store: Store) -> None:
    """`drafters up`'s planner and worker state the same worker as they start: neither may die of the race."""
    errors: list[BaseException] = []
    for attempt in range(10):
        worker = WorkerCapability(worker_id=f"racer-{attempt}", device="cpu", memory_bytes=GIB,
                                  engines={"pytorch": "t"}, disk_budget_bytes=GIB)
        start = threading.Barrier(4)

        def state(worker: WorkerCapability = worker, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                store.workers.register_worker(worker, host="h")
            except BaseException as error:  # noqa: BLE001 - collected for the assertion
                errors.append(error)

        threads = [threading.Thread(target=state) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert sorted(w.worker_id for w in store.workers.live_workers()) == sorted(f"racer-{n}" for n in range(10))
