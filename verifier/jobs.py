"""Verification jobs: a request runs through the engine and lands in the store as a run, ok or failed.

`verify_now` runs one request in this process; `Worker` claims queued requests (a lease kept alive by heartbeats
while the engine runs), so a worker that dies leaves a lease that expires and another worker retries the job.
Two kinds of job: `verify` (one run, batch 1) and `curve` (a speedup curve over concurrency on llama.cpp,
`verifier.curve_job`), which lands in the store as curves, not as a run.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from registry.domain.engines import VERIFIER_ENGINES
from registry.domain.measurement import RunSettings
from registry.domain.curve import SpeedupCurve
from registry.domain.run import Run
from registry.domain.stored_json import from_json, to_json
from registry.recording import record_measurement
from registry.store import Store
from registry.store import jobs as queue
from verifier.curve_job import CURVE, CurveFailed, CurveRequest, curve_engine, run_curve
from verifier.engines.llamacpp.engine import run_llamacpp_pair
from verifier.folders import LoadError, cached_snapshot
from verifier.harness.record import failed_run, named_run
from verifier.pair_folders import drafter_path, fetched, resolve_folder
from verifier.prompts import bundled_set, load_prompt_file

log = logging.getLogger(__name__)
VERIFY = "verify"


@dataclass(frozen=True)
class VerifyRequest:
    """What to measure. Targets and drafters are local folders, or repo ids already in the local Hub cache."""

    target: str
    drafter: str | None
    target_revision: str | None = None
    drafter_revision: str | None = None
    prompt_sets: tuple[str, ...] = ("code", "math", "chat", "multilingual")
    prompt_files: tuple[str, ...] = ()
    settings: RunSettings = field(default_factory=RunSettings)
    engine: str = "pytorch"
    # Download both repos at the pinned revisions first (autoverify jobs); otherwise folders or the local cache.
    download: bool = False

    def __post_init__(self) -> None:
        if self.engine not in VERIFIER_ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; choose one of {', '.join(VERIFIER_ENGINES)}")

    def to_payload(self) -> dict[str, Any]:
        """The job's payload (the same JSON encoding a run is stored in)."""
        return to_json(self)

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> VerifyRequest:
        """The request a payload holds, its settings typed again: the one place stored JSON becomes `RunSettings`
        (a key an older payload lacks reads as the setting's default)."""
        return from_json(cls, payload)


# Exceptions that only a programming error raises (never a refusal, a missing file or a lack of memory).
CRASHES = (TypeError, AttributeError, KeyError, IndexError, NameError, AssertionError, UnboundLocalError)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or error.__class__.__name__
    return text if len(text) <= 500 else text[:497] + "..."


class LeaseLost(RuntimeError):
    """Another worker holds this worker's job now (this one stalled past its lease): the job is its, so this
    worker stops and records nothing."""


@dataclass
class Lease:
    """A worker's lease on the job in hand: renewed by the heartbeat thread, checked at each step of the run and
    renewed right before the run is stored.

    A heartbeat that fails (a database stalled or locked past its busy timeout, a dropped connection) is said and
    retried at the next beat; only an answer that the job is no longer ours ends it, and marks the lease lost."""

    store: Store
    job_id: int
    worker_id: str
    lease_s: float
    retry_s: float
    lost: threading.Event = field(default_factory=threading.Event)

    def renew(self) -> bool | None:
        """True: extended; False: another worker holds the job (lost); None: the database did not answer."""
        try:
            ours = self.store.jobs.heartbeat(self.job_id, self.worker_id, lease_s=self.lease_s)
        except Exception as error:  # noqa: BLE001 - the heartbeat must outlive any database error
            log.warning("heartbeat of job %s failed, retrying in %gs: %s: %s", self.job_id, self.retry_s,
                        type(error).__name__, _one_line(getattr(error, "orig", None) or error))
            return None
        if not ours:
            log.warning("job %s: lease lost to another worker; this worker stops it and records nothing",
                        self.job_id)
            self.lost.set()
        return ours

    def check(self) -> None:
        if self.lost.is_set():
            raise LeaseLost(f"job {self.job_id}: another worker holds its lease")

    def confirm(self, patience_s: float | None = None) -> None:
        """Renew now, before storing: the store then has a whole lease to land in before any other worker may
        take the job. A database that does not answer is retried for `patience_s` (default ten leases), then the
        job is given up as lost: nothing can be stored anyway, and its lease runs out for another worker."""
        self.check()
        deadline = time.monotonic() + (patience_s if patience_s is not None else 10 * self.lease_s)
        while (ours := self.renew()) is None:
            if time.monotonic() >= deadline:
                self.lost.set()
                break
            time.sleep(self.retry_s)
        if not ours:
            raise LeaseLost(f"job {self.job_id}: lease not renewed before storing the run")


def with_fetched_folders(store: Store, request: VerifyRequest) -> tuple[VerifyRequest, tuple[Path, Path | None] | None]:
    """A request naming repo ids that were fetched: its folders from the downloads, its revisions pinned to the
    fetched shas (the run says which commit it measured). Unchanged, with no folders, when neither side was fetched
    or the other side cannot be found (verify_now then says what is missing)."""
    target = fetched(store, request.target, request.target_revision)
    drafter = fetched(store, request.drafter, request.drafter_revision) if request.drafter else None
    if target is None and drafter is None:
        return request, None
    try:
        target_dir = target[0] if target else resolve_folder(request.target, request.target_revision)
        drafter_dir = drafter[0] if drafter else (
            drafter_path(request.drafter, request.drafter_revision) if request.drafter else None)
    except (LoadError, FileNotFoundError):
        return request, None
    pinned = replace(request, target_revision=target[1] if target else request.target_revision,
                     drafter_revision=drafter[1] if drafter else request.drafter_revision)
    return pinned, (target_dir, drafter_dir)


def _prompt_sets(request: VerifyRequest) -> list[Any]:
    sets = [bundled_set(name) for name in request.prompt_sets]
    sets += [load_prompt_file(Path(p)) for p in request.prompt_files]
    return sets


def curve_now(store: Store, request: CurveRequest, *, job_id: int | None = None, lease: Lease | None = None,
              progress: Callable[[int, int, str], None] | None = None) -> list[SpeedupCurve]:
    """Measure (and store) a curve request in this process. A failure is raised as one line (`CurveFailed`): a
    curve has no failed-run form; a failed job keeps its reason."""
    check = lease.check if lease is not None else (lambda: None)
    confirm = lease.confirm if lease is not None else (lambda: None)
    try:
        target_dir = resolve_folder(request.target, request.target_revision)
        drafter = drafter_path(request.drafter, request.drafter_revision)
        return run_curve(store, request, target_dir, drafter, job_id=job_id, check=check, confirm=confirm,
                         progress=progress)
    except (LeaseLost, CurveFailed):
        raise
    except Exception as error:  # noqa: BLE001 - one line for the job's error and the command's
        if isinstance(error, CRASHES):
            log.exception("curve job %s crashed", job_id)
        raise CurveFailed(_one_line(error), retry=getattr(error, "retry", False) is True) from error


def enqueue_curve(store: Store, request: CurveRequest) -> queue.JobRecord | None:
    """Queue a curve; only a worker with llama.cpp claims it."""
    gpus = 1 if request.settings.device.startswith("cuda") else 0
    return store.jobs.enqueue(CURVE, request.to_payload(), num_gpus=gpus, engine=curve_engine())


def run_engine(request: VerifyRequest, progress: Callable[[int, int, str], None] | None = None,
               folders: tuple[Path, Path | None] | None = None) -> Run:
    """Either engine, driven by the one harness (`verifier.harness.run`): the same result type from both.
    `folders`: the (target, drafter) folders to run, already downloaded at the request's revisions."""
    from verifier.engines.pytorch import run_pair  # torch, which only PyTorch runs need

    settings = request.settings
    target_dir = folders[0] if folders else resolve_folder(request.target, request.target_revision)
    if request.engine == "llamacpp":
        drafter = folders[1] if folders else (
            drafter_path(request.drafter, request.drafter_revision) if request.drafter else None)
        return run_llamacpp_pair(target_dir, drafter, _prompt_sets(request), settings, progress)
    drafter_dir = folders[1] if folders else (
        resolve_folder(request.drafter, request.drafter_revision) if request.drafter else None)
    return run_pair(target_dir, drafter_dir, _prompt_sets(request), settings, progress)


def verify_now(
    store: Store,
    request: VerifyRequest,
    *,
    job_id: int | None = None,
    run_id: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    folders: tuple[Path, Path | None] | None = None,
    provenance: dict[str, Any] | None = None,
    lease: Lease | None = None,
) -> Run:
    """Run and store. A failure is stored as a failed run with a one-line reason and returned, not raised.
    `folders`: downloaded folders to run (see run_engine); `provenance`: facts stored with the run (downloads).

    `lease`: the job's lease, when a worker runs it. The run stops (LeaseLost) at its next step once another
    worker holds the job, and the lease is renewed right before anything is stored, so a worker that lost its
    job records nothing. A transient failure (an error whose `retry` is True: the converter killed by a signal)
    is no property of the pair: it is raised, not stored, so the job is retried and `drafters verify` exits 1."""
    run_id = run_id or uuid.uuid4().hex

    def step(done: int, total: int, label: str) -> None:
        if lease is not None:
            lease.check()
        if progress is not None:
            progress(done, total, label)

    try:
        run = run_engine(request, step, folders)
    except LeaseLost:
        raise
    except Exception as error:  # noqa: BLE001 - every failure becomes a stored, explained run
        if getattr(error, "retry", False) is True:
            raise
        reason = _one_line(error)
        if isinstance(error, CRASHES):
            # A refusal names what the pair lacks; a crash is the verifier's own bug: said so, traceback in the log.
            log.exception("run %s crashed", run_id)
            reason = f"crashed ({error.__class__.__name__}), a bug in the verifier: {reason}"
        else:
            log.warning("run %s failed: %s", run_id, error)
        if lease is not None:
            lease.confirm()
        return record_measurement(store, failed_run(request, reason, job_id=job_id, run_id=run_id))
    if provenance:
        run = replace(run, provenance={**run.provenance, **provenance})
    if lease is not None:
        lease.confirm()
    # With its regression event and the pricing model's forecast (shown by `drafters runs` and the dashboard), in
    # one transaction.
    return record_measurement(store, named_run(request, run, job_id=job_id, run_id=run_id))


def job_run_id(job_id: int) -> str:
    """The run id of a job, the same on every attempt: a retry of a job whose worker died after storing the run
    (before marking the job done) finds that run instead of storing a second one."""
    return f"job{job_id}"


def enqueue(store: Store, request: VerifyRequest, *, dedupe_key: str | None = None,
            max_attempts: int = 3, memory_bytes: int | None = None) -> queue.JobRecord | None:
    """Queue a request; `memory_bytes`: the device memory it needs, so only a worker that has it claims it."""
    gpus = 1 if request.settings.device.startswith("cuda") else 0
    return store.jobs.enqueue(VERIFY, request.to_payload(), dedupe_key=dedupe_key, max_attempts=max_attempts,
                              num_gpus=gpus, memory_bytes=memory_bytes,
                              engine=VERIFIER_ENGINES[request.engine] if memory_bytes is not None else None)


def enqueue_cached_pair(store: Store, drafter: str, drafter_sha: str, target: str, target_sha: str,
                        *, cache_dir: Path | None = None,
                        settings: RunSettings | None = None) -> queue.JobRecord | None:
    """Queue a measurement of a newly compatible pair when both repos sit in the local Hugging Face cache at those
    shas (the verifier never downloads); each (drafter sha, target sha) pair is queued once."""
    try:
        cached_snapshot(drafter, drafter_sha, cache_dir=cache_dir)
        cached_snapshot(target, target_sha, cache_dir=cache_dir)
    except LoadError:
        return None
    request = VerifyRequest(target=target, drafter=drafter, target_revision=target_sha, drafter_revision=drafter_sha,
                            settings=settings or RunSettings())
    return enqueue(store, request, dedupe_key=f"pair:{drafter}@{drafter_sha}:{target}@{target_sha}")


@dataclass
class Worker:
    """Claims verify jobs, runs each with a heartbeat, stores the run, and goes on whatever happens."""

    store: Store
    worker_id: str = field(default_factory=lambda: f"worker-{uuid.uuid4().hex[:8]}")
    lease_s: float = 60.0
    heartbeat_s: float = 10.0
    executor: Callable[[Store, queue.JobRecord], Run] | None = None
    # What this worker can take (None: anything): device memory in bytes and the engines it has.
    memory_bytes: int | None = None
    engines: tuple[str, ...] | None = None
    # Fetches a download job's folders: (request) -> ((target, drafter) folders, provenance); raises to fail it.
    fetch: Callable[[VerifyRequest], tuple[tuple[Path, Path | None], dict[str, Any]]] | None = None
    # Told each step of the job in hand: (job id, steps done, steps in all, what the step was).
    on_progress: Callable[[int, int, int, str], None] | None = None

    # The lease on the job in hand (None between jobs): run_job checks it, so an executor that calls run_job
    # (a test's, tests/support/worker_process.py) stops and records nothing once the lease is lost too.
    lease: Lease | None = field(default=None, init=False)

    def run_job(self, job: queue.JobRecord) -> Run:
        request = VerifyRequest.from_payload(job.payload)
        lease = self._lease_of(job)
        progress = self._progress_of(job)
        if request.download:
            if self.fetch is None:
                raise RuntimeError("this worker does not download; the job needs a worker that does")
            folders, provenance = self.fetch(request)
            if lease is not None:
                lease.check()
            return verify_now(self.store, request, job_id=job.id, run_id=job_run_id(job.id), folders=folders,
                              provenance=provenance, lease=lease, progress=progress)
        return verify_now(self.store, request, job_id=job.id, run_id=job_run_id(job.id), lease=lease,
                          progress=progress)

    def _progress_of(self, job: queue.JobRecord) -> Callable[[int, int, str], None] | None:
        report = self.on_progress
        if report is None:
            return None
        return lambda done, total, label: report(job.id, done, total, label)

    def _lease_of(self, job: queue.JobRecord) -> Lease | None:
        return self.lease if self.lease is not None and self.lease.job_id == job.id else None

    def _run(self, job: queue.JobRecord) -> Run | list[SpeedupCurve]:
        """A curve job runs here, beside the llama-servers it starts; a verify job through the executor."""
        if job.kind == CURVE:
            return curve_now(self.store, CurveRequest.from_payload(job.payload), job_id=job.id,
                             lease=self._lease_of(job), progress=self._progress_of(job))
        return (self.executor or (lambda _store, j: self.run_job(j)))(self.store, job)

    def work_once(self) -> queue.JobRecord | None:
        """Claim and finish one job that fits this worker; None when there is none. A job whose lease another
        worker took meanwhile is left to that worker: nothing is recorded, the job is not touched."""
        job = self.store.jobs.claim(self.worker_id, lease_s=self.lease_s, kinds=(VERIFY, CURVE),
                                    memory_bytes=self.memory_bytes, engines=self.engines)
        if job is None:
            return None
        stop = threading.Event()
        self.lease = Lease(self.store, job.id, self.worker_id, self.lease_s, self.heartbeat_s)
        beat = threading.Thread(target=self._heartbeat, args=(self.lease, stop), daemon=True)
        beat.start()
        try:
            record = self._run(job)
        except LeaseLost as lost:
            log.warning("%s", lost)
            return self.store.jobs.get_job(job.id)
        except Exception as error:  # noqa: BLE001 - the worker goes on
            # A download that cannot succeed (gated, gone, disk full, over budget) says so and is not retried.
            retry = bool(getattr(error, "retry", True))
            self.store.jobs.fail(job.id, self.worker_id, error=_one_line(error), retry=retry)
            return self.store.jobs.get_job(job.id)
        finally:
            stop.set()
            beat.join()
            self.lease = None
        if isinstance(record, list):  # a curve job: its curves are stored (they name the job)
            self.store.jobs.finish(job.id, self.worker_id, run_id=None)
        elif record.status == "ok":
            self.store.jobs.finish(job.id, self.worker_id, run_id=record.run_id)
        else:
            # A run that fails on its own (bad weights, no fit, out of memory) fails the same way again.
            self.store.jobs.fail(job.id, self.worker_id, error=record.failure_reason or "failed", retry=False,
                                 run_id=record.run_id)
        return self.store.jobs.get_job(job.id)

    def _heartbeat(self, lease: Lease, stop: threading.Event) -> None:
        """Renew the lease every heartbeat_s until the job ends or is lost; a failed renewal is retried."""
        while not stop.wait(self.heartbeat_s):
            if lease.renew() is False:
                return

    def reclaim_own(self) -> list[int]:
        """At start: the jobs a previous process under this worker id left running go back to the queue."""
        return self.store.jobs.release_own(self.worker_id)

    def run_forever(self, stop: threading.Event, idle_s: float = 2.0,
                    on_job: Callable[[queue.JobRecord], None] | None = None) -> None:
        self.reclaim_own()
        while not stop.is_set():
            job = self.work_once()
            if job is None:
                stop.wait(idle_s)
            elif on_job is not None:
                on_job(job)

    def drain(self, timeout_s: float | None = None) -> int:
        """Work until the queue is empty (or the timeout passes); returns the number of jobs handled."""
        self.reclaim_own()
        started, handled = time.monotonic(), 0
        while timeout_s is None or time.monotonic() - started < timeout_s:
            if self.work_once() is None:
                return handled
            handled += 1
        return handled
