"""A job is never measured twice: the worker's heartbeat outlives database errors, and a worker that lost its
lease stops and records nothing (verifier.jobs.Lease). Real SQLite stalls, real tiny models.

Probes guarded here (hardening round 4, item 3):
- a database stall longer than the lease (another connection holding SQLite's exclusive lock) makes heartbeats
  fail with "database is locked": the heartbeat thread says so and goes on (it used to die with the exception)
- a second worker that takes the job after the stall measures it; the first stops at its next step and records
  nothing, so the measurement runs to its end once and the job ends done by the second worker
- a stall that ends before anyone else takes the job: the first worker's heartbeat resumes and it finishes
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from registry.domain.measurement import RunSettings
from registry.domain.run import Run
from registry.store import Store
from registry.store import jobs as queue
from verifier.jobs import VerifyRequest, Worker, enqueue

FAST = RunSettings(max_new_tokens=16, repeats=1, warmup=0)
# SQLite's busy timeout for these stores (a URL parameter, registry.store.db): a lock held longer fails a statement.
BUSY_TIMEOUT_S = 0.5


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    return tmp_path / "registry.db"


def open_store(path: Path) -> Store:
    return Store.open(f"sqlite:///{path}?timeout={BUSY_TIMEOUT_S}")


class Stall:
    """Another connection holding SQLite's exclusive lock: every other connection's statement waits for it, and
    fails ("database is locked") once its busy timeout passes."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, timeout=10, isolation_level=None)

    def __enter__(self) -> Stall:
        self.connection.execute("BEGIN EXCLUSIVE")
        return self

    def __exit__(self, *_exc: object) -> None:
        self.connection.execute("ROLLBACK")
        self.connection.close()


def measuring_worker(store: Store, name: str, *, lease_s: float, heartbeat_s: float,
                     finished: list[str], entered: threading.Event | None = None,
                     go_on: threading.Event | None = None) -> Worker:
    """A worker whose executor is the real run (Worker.run_job), optionally held at its start until `go_on`, as
    a long measurement would be; `finished` lists the workers whose measurement ran to its end."""
    worker = Worker(store, worker_id=name, lease_s=lease_s, heartbeat_s=heartbeat_s)

    def run(_store: Store, job: queue.JobRecord) -> Run:
        if entered is not None:
            entered.set()
        if go_on is not None:
            assert go_on.wait(120)
        record = worker.run_job(job)
        finished.append(name)
        return record

    worker.executor = run
    return worker


def test_a_worker_that_lost_its_lease_in_a_stall_stops_and_records_nothing(
    sqlite_file: Path, tiny_target_dir: Path, tiny_draft_lm_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store_a, store_b = open_store(sqlite_file), open_store(sqlite_file)
    job = enqueue(store_a, VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir),
                                         prompt_sets=("code",), settings=FAST))
    finished: list[str] = []
    entered, go_on = threading.Event(), threading.Event()
    # A's first heartbeat comes after 3 s, well past its 1 s lease: the stall below covers it.
    first = measuring_worker(store_a, "first", lease_s=1.0, heartbeat_s=3.0, finished=finished, entered=entered,
                             go_on=go_on)
    errors: list[BaseException] = []

    def work_first() -> None:
        try:
            first.work_once()
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    thread = threading.Thread(target=work_first)
    caplog.set_level(logging.WARNING, logger="verifier.jobs")
    thread.start()
    assert entered.wait(60)
    with Stall(sqlite_file):
        # The heartbeat at 3 s waits BUSY_TIMEOUT_S for the lock and fails; the next one is 3 s later.
        time.sleep(3.0 + BUSY_TIMEOUT_S + 0.3)
    # The stall is over and the lease ran out long ago: a second worker takes the job before the first one's next
    # heartbeat, and measures it.
    second = measuring_worker(store_b, "second", lease_s=60.0, heartbeat_s=0.5, finished=finished)
    claimed = second.work_once()
    assert claimed is not None and claimed.id == job.id
    go_on.set()  # the first worker's measurement goes on: it must notice the lost lease and stop
    thread.join(120)
    assert not thread.is_alive() and errors == []

    assert finished == ["second"]  # measured to its end once
    done = store_a.jobs.get_job(job.id)
    assert done.status == queue.DONE and done.lease_owner is None and done.attempts == 2
    assert [r.job_id for r in store_a.runs.list_runs()] == [job.id]
    assert "database is locked" in caplog.text and "lease lost to another worker" in caplog.text, caplog.text


def test_a_stall_shorter_than_anyone_elses_claim_lets_the_worker_finish(
    sqlite_file: Path, tiny_target_dir: Path, tiny_draft_lm_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(sqlite_file)
    job = enqueue(store, VerifyRequest(target=str(tiny_target_dir), drafter=str(tiny_draft_lm_dir),
                                       prompt_sets=("code",), settings=FAST))
    finished: list[str] = []
    entered, go_on = threading.Event(), threading.Event()
    worker = measuring_worker(store, "only", lease_s=30.0, heartbeat_s=0.2, finished=finished, entered=entered,
                              go_on=go_on)
    caplog.set_level(logging.WARNING, logger="verifier.jobs")
    thread = threading.Thread(target=worker.work_once)
    thread.start()
    assert entered.wait(60)
    with Stall(sqlite_file):
        time.sleep(4 * (0.2 + BUSY_TIMEOUT_S))  # several heartbeats fail meanwhile
    lease = store.jobs.get_job(job.id).lease_expires_at
    time.sleep(1.0)
    assert store.jobs.get_job(job.id).lease_expires_at > lease  # the heartbeat thread is alive after the errors
    go_on.set()
    thread.join(120)
    assert finished == ["only"]
    assert store.jobs.get_job(job.id).status == queue.DONE
    assert caplog.text.count("database is locked") >= 2, caplog.text  # failed beats, each said and retried
