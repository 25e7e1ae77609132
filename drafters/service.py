"""`drafters up`: the long-running service on one machine — watcher, alert delivery, feed, worker, dashboard, API.

Each part runs in its own thread (the dashboard and the API in their own processes) and survives the others'
failures; parts whose extras are not installed are skipped with one line saying so. A part that dies is said, recorded and
restarted after a growing pause; each part writes what it is doing, when it last succeeded and its last error to
the database (`service_status`), which `drafters status` reads from any process.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dashboard.launch import free_port, launch, port_taken
from registry.alerts import webhooks as alerts
from registry.alerts.feed import write_feed
from registry.alerts.secrets import SecretBox
from registry.calibration.run_view import result_line
from registry.files import open_private_append
from registry.hub import HubClient
from registry.processes import die_with_parent, stop as stop_process
from registry.settings import CanaryServer, Settings
from registry.domain.memory import binary_size
from registry.domain.records import JobRecord
from registry.store import Store
from registry.watch.poller import DRAFTER_QUERIES, Watcher, drafter_queries_text, stable_owner
from verifier.demo import StepReport, enqueue_demo
from registry.domain.watch_list import watched_orgs
from registry.domain.plan import WorkerCapability, counts
from verifier import autoverify
from verifier.doctor import run_doctor
from verifier.ingest import public_url
from verifier.jobs import Worker, enqueue_cached_pair

log = logging.getLogger(__name__)
# Pauses before restarting a part that died: its first death is retried quickly, a crash loop slowly.
RESTART_DELAYS_S = (1.0, 5.0, 30.0, 120.0)


@dataclass
class Service:
    settings: Settings
    store: Store
    say: Callable[[str], None]
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    dashboard: object | None = None  # subprocess.Popen when started
    hub_reachable: bool | None = None
    restart_delays_s: tuple[float, ...] = RESTART_DELAYS_S
    plan_now: threading.Event = field(default_factory=threading.Event)  # a new pair: plan without waiting
    worker_id: str | None = None
    join_timeout_s: float = 5.0  # how long close() waits for each part
    # Parts that recorded their own last state (stopped, or done with what they did): close() marks the others.
    ended: set[str] = field(default_factory=set)
    downloading: bool = False
    on_build_step: StepReport | None = None  # the demo build's training steps (None: a line at each quarter)
    job_quarters: dict[int, int] = field(default_factory=dict)  # the quarter of each job's steps last said

    @property
    def instance(self) -> str:
        """This host and home: the key of this service's status rows and the owner of its watch leases, the same
        after a restart so the new process takes its own orgs back at once."""
        return stable_owner(self.settings.home_dir)

    def status(self, name: str, state: str, *, detail: str | None = None, success: bool = False,
               error: str | None = None, restarted: bool = False) -> None:
        """Record a part's state; a database that cannot take it now is logged, never fatal."""
        try:
            self.store.watch_state.set_service_status(self.instance, name, state, detail=detail, success=success,
                                                      error=error, restarted=restarted)
        except Exception as exc:  # noqa: BLE001 - status is advisory
            log.warning("could not record the %s status: %s", name, type(exc).__name__)

    def start(self, *, watch: bool = True, worker: bool = True, dashboard: bool = True, demo: bool = True,
              api: bool = True) -> None:
        summary = self.store.catalog.load_catalog()
        self.say(f"database {self.settings.shown_database_url} at head; catalog: {summary.drafters} drafters "
                 f"({summary.dflash_21} DFlash v1), {summary.targets} targets")
        if dashboard:
            self._start_dashboard()
        if api:
            self._thread("api", self._api_loop)
        if watch:
            self._thread("watcher", self._watch_loop)
        self._thread("alerts", self._alerts_loop)
        verifier_installed = importlib.util.find_spec("torch") is not None
        if worker and verifier_installed:
            self._thread("worker", self._worker_loop)
            if self.settings.autoverify:
                self._thread("planner", self._plan_loop)
        elif worker:
            self.say("verifier extra not installed: no worker (pip install 'drafter-registry[verifier]')")
        if demo and verifier_installed:
            self._thread("demo", self._demo)
        if self.settings.canary_servers:
            self._thread("canary", self._canary_loop)

    def _thread(self, name: str, target: Callable[[], str | None]) -> None:
        """Run a part, restarted when it dies. A part that returns has finished (the demo): what it returns says
        what it did, recorded as its last success; one that was told to stop is recorded stopped."""
        def supervised() -> None:
            deaths = 0
            restarted = False
            outcome: str | None = None
            while not self.stop.is_set():
                self.status(name, "running", restarted=restarted)
                try:
                    outcome = target()
                except Exception as exc:  # noqa: BLE001 - one part failing must not take the service down
                    log.exception("%s died", name)
                    delay = self.restart_delays_s[min(deaths, len(self.restart_delays_s) - 1)]
                    deaths += 1
                    error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
                    self.say(f"{name} died ({error}); restarting in {delay:g}s")
                    self.status(name, "restarting", detail=f"restart {deaths} in {delay:g}s", error=error)
                    if self.stop.wait(delay):
                        break
                    restarted = True
                    continue
                break  # a part that returns has finished (the demo) or was told to stop
            if outcome is not None:
                self.status(name, "done", detail=outcome, success=True)
            else:
                self.status(name, "stopped", detail="stopped with drafters up" if self.stop.is_set() else None)
            self.ended.add(name)

        thread = threading.Thread(target=supervised, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _start_dashboard(self) -> None:
        log_path = self.settings.home_dir / "dashboard.log"
        port = self.settings.dashboard_port
        if port_taken(port):
            # Advertising a port another process serves would send the user to its page, not ours.
            port = free_port()
            self.say(f"dashboard port {self.settings.dashboard_port} is taken by another process; using {port}")
        with open_private_append(log_path) as sink:
            self.dashboard = launch(port, self.settings.resolved_database_url, stdout=sink, stderr=sink)
        self.say(f"dashboard: http://127.0.0.1:{port}/ (log: {log_path})")

    def _api_loop(self) -> None:
        """The read-only JSON API: `drafters serve` in a process of its own, with one worker process per core
        (drafters/api/workers.py), until the service stops. It dies with this process, even of SIGKILL (its
        workers with it); a taken port or a crash ends this part, which is said and retried like any part."""
        log_path = self.settings.home_dir / "api.log"
        env = {**os.environ, "DRAFTERS_HOME": str(self.settings.home_dir),
               "DRAFTERS_DATABASE_URL": self.settings.resolved_database_url,
               "DRAFTERS_API_HOST": self.settings.api_host, "DRAFTERS_API_PORT": str(self.settings.api_port),
               "DRAFTERS_API_CORS_ORIGINS": json.dumps(self.settings.api_cors_origins)}
        # No token is no variable: `serve` warns about a token set but empty (and refuses one off loopback).
        env.pop("DRAFTERS_API_TOKEN", None)
        if self.settings.api_token is not None:
            env["DRAFTERS_API_TOKEN"] = self.settings.api_token.get_secret_value()
        # The API of `up` has no webhook route (`drafters hub-webhooks` sets one up).
        env.pop("DRAFTERS_HUB_WEBHOOK_SECRET", None)
        start = log_path.stat().st_size if log_path.exists() else 0
        with open_private_append(log_path) as sink:
            process = subprocess.Popen([sys.executable, "-m", "drafters.cli", "serve"], env=env, stdout=sink,
                                       stderr=sink, stdin=subprocess.DEVNULL,
                                       preexec_fn=die_with_parent)  # noqa: PLW1509 - only prctl, before exec
        try:
            url = self._wait_listening(process, log_path, start)
            self.say(f"API: {url}/ (OpenAPI: {url}/openapi.json; log: {log_path})")
            self.status("api", "serving", detail=url, success=True)
            while not self.stop.wait(1.0):
                if process.poll() is not None:
                    raise RuntimeError(f"the API process exited ({process.returncode}); see {log_path}")
        finally:
            stop_process(process)

    def _wait_listening(self, process: subprocess.Popen[bytes], log_path: Path, start: int) -> str:
        """The URL `drafters serve` says it listens on, from its log; its last line if it exits first."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not self.stop.is_set():
            with log_path.open("rb") as log_file:
                log_file.seek(start)
                lines = log_file.read().decode(errors="replace").splitlines()
            found = next((line for line in lines if " listening on " in line), None)
            if found is not None:
                return found.split(" listening on ", 1)[1].split()[0].rstrip("/")
            if process.poll() is not None:
                last = next((line for line in reversed(lines) if line.strip()), "no output")
                raise RuntimeError(f"the API did not start: {last.strip()}")
            time.sleep(0.1)
        raise RuntimeError(f"the API did not start within 120 s; see {log_path}")

    def _watch_loop(self) -> None:
        client = HubClient(self.settings.hub_endpoint, self.settings.token_value(), self.settings.hub_cache_dir,
                           timeout=self.settings.hub_timeout_s)
        watcher = Watcher(self.store, client, watched_orgs(self.settings.watched_orgs), owner=self.instance,
                          on_pair=self._on_pair if importlib.util.find_spec("torch") else None,
                          drafter_queries=DRAFTER_QUERIES)
        while not self.stop.is_set():
            # Another watcher on the same database that polled an org this interval spares us that org.
            self.status("watcher", "polling")
            report = watcher.poll_once(skip_if_polled_within_s=self.settings.watch_interval_s / 2)
            wait = max(self.settings.watch_interval_s, report.retry_after or 0.0)
            failed = sum(len(o.failed) for o in report.orgs)
            detail = (f"last poll: {len(report.orgs)} orgs and queries, {report.requests} Hub requests, "
                      f"{len(report.events)} events" + (f", {failed} repos failed" if failed else "")
                      + f"; next in {wait:.0f}s")
            if report.config_error is not None:
                # A refused token fails every call: say it once and wait to be restarted with a new one.
                self.say(f"watcher: {report.config_error}")
                self.status("watcher", "stopped", detail="configuration error", error=report.config_error)
                self.stop.wait()
                return
            trouble = report.unreachable or report.stopped or next((e for e in report.errors), None)
            self.status("watcher", "waiting", detail=detail, success=not (report.unreachable or report.stopped),
                        error=trouble)
            if report.stopped:
                self.say(f"watcher: {report.stopped}; next poll in {wait:.0f}s")
            reachable = not report.unreachable
            # Said once per change, not once per poll: an offline machine hears it one time.
            if reachable != self.hub_reachable:
                if reachable:
                    self.say(f"watching {len(watcher.orgs)} orgs on {self.settings.shown_hub_endpoint} "
                             f"and drafters from anyone ({drafter_queries_text()})")
                else:
                    self.say(f"the Hub at {self.settings.shown_hub_endpoint} cannot be reached ({report.unreachable}); "
                             "going on with what the registry has")
                self.hub_reachable = reachable
            for event in report.events:
                self.say(f"[{event.type}] {event.payload.get('message', event.subject)}")
            self.stop.wait(wait)

    def _on_pair(self, drafter: str, drafter_sha: str, target: str, target_sha: str, verdict: str) -> None:
        if self.settings.autoverify:
            self.plan_now.set()  # the planner downloads what fits and queues it
            return
        job = enqueue_cached_pair(self.store, drafter, drafter_sha, target, target_sha)
        if job is not None:
            self.say(f"queued a measurement of {drafter} on {target} ({verdict}); its weights are in the local cache")

    def _alerts_loop(self) -> None:
        secrets = SecretBox(self.settings.home_dir / "secrets.json")
        feed_path = self.settings.home_dir / "feed.atom"
        while not self.stop.is_set():
            # A bad round (database away, disk full) is said and retried; it never ends the loop.
            try:
                alerts.deliver_pending(self.store, secrets, allow_internal=self.settings.webhook_allow_internal)
                write_feed(self.store.events.events(), feed_path)
                self.status("alerts", "waiting", detail="delivered pending alerts; next round in 30s", success=True)
            except Exception as exc:  # noqa: BLE001 - alerts keep going for the life of the service
                log.exception("alerts round failed")
                self.say(f"alerts: this round failed ({exc.__class__.__name__}); retrying in 30 s")
                self.status("alerts", "waiting", detail="round failed; retrying in 30s",
                            error=f"{exc.__class__.__name__}: {exc}")
            self.stop.wait(30.0)

    def _capability(self) -> WorkerCapability:
        self.worker_id = self.worker_id or f"{self.instance}-worker"
        return autoverify.capability(self.settings, self.worker_id)

    def _plan_loop(self) -> None:
        """Plan every exact pair against this worker and queue what fits; again after each new pair."""
        capability = self._capability()
        while not self.stop.is_set():
            autoverify.announce(self.store, capability)
            rows, queued = autoverify.plan_and_enqueue(self.store, self.settings, capability)
            for job in queued:
                self.say(f"queued a measurement of {job.payload['drafter']} on {job.payload['target']} "
                         f"(downloads at the recorded shas)")
            tally = counts(rows)
            self.status("planner", "waiting", success=True, detail=(
                f"{len(rows)} pairs: " + ", ".join(f"{n} {state}" for state, n in tally.items()) if rows
                else "no exact pairs yet"))
            self.plan_now.wait(self.settings.autoverify_interval_s)
            self.plan_now.clear()

    def _download_progress(self, what: str, done: int, total: int) -> None:
        state = "done" if done >= total else "downloading"
        self.downloading = done < total
        self.status("download", state, detail=f"{what}: {binary_size(done)} of {binary_size(total)}",
                    success=done >= total)

    def _job_progress(self, job_id: int, done: int, total: int, label: str) -> None:
        """A job's measurement as it goes: a line at each quarter of its steps (a CPU job takes minutes)."""
        quarter = 4 * done // total if total else 0
        if quarter <= self.job_quarters.get(job_id, 0):
            return
        self.job_quarters[job_id] = quarter
        if quarter < 4:  # the last quarter is the job's result line
            self.say(f"verify job {job_id}: {done} of {total} steps ({label})")
        self.status("worker", "running", detail=f"job {job_id}: {done} of {total} steps")

    def _worker_loop(self) -> None:
        # The same id after a restart (this host and home), so the new process takes back the job the old one held.
        worker = Worker(self.store, worker_id=self.worker_id or f"{self.instance}-worker",
                        on_progress=self._job_progress)
        if self.settings.autoverify:
            capability = self._capability()
            fetch = autoverify.host_fetcher(self.store, self.settings, capability.disk_budget_bytes,
                                            on_progress=self._download_progress)
            worker = Worker(self.store, worker_id=capability.worker_id, memory_bytes=capability.memory_bytes,
                            engines=tuple(capability.engines), fetch=fetch, on_progress=self._job_progress)
            autoverify.announce(self.store, capability)

        def report(job: JobRecord) -> None:
            self.job_quarters.pop(job.id, None)  # the job is over: its progress is not kept
            run = self.store.runs.get_run(job.run_id) if job.run_id else None
            self.say(f"verify job {job.id}: {job.status}" + (f" ({job.error})" if job.error else "")
                     + (f": {result_line(run)}" if run is not None else ""))
            self.status("worker", "running", detail=f"last job {job.id}: {job.status}",  # type: ignore[attr-defined]
                        success=not job.error, error=job.error or None)  # type: ignore[attr-defined]

        worker.run_forever(self.stop, on_job=report)

    def _canary_loop(self) -> None:
        """Probe each listed server every canary_interval_s; an event is raised when a problem starts, not again
        while it lasts (a later check that is healthy ends it)."""
        raised: dict[str, set[str]] = {}
        while not self.stop.is_set():
            for number, server in enumerate(self.settings.canary_servers, start=1):
                self._check_server(f"canary {number}", server, raised)
            self.stop.wait(self.settings.canary_interval_s)

    def _check_server(self, name: str, server: CanaryServer, raised: dict[str, set[str]]) -> None:
        shown = public_url(server.url)
        api_key = os.environ.get(server.api_key_env) if server.api_key_env else None
        earlier = raised.get(server.url, set())
        try:
            report = run_doctor(self.store, server.url, kind=server.engine, target=server.target,
                                drafter=server.drafter, hardware=server.hardware, api_key=api_key,
                                raise_events=lambda kinds: tuple(k for k in kinds if k not in earlier))
        except Exception as exc:  # noqa: BLE001 - one server failing must not stop the checks of the others
            self.status(name, "unreachable", detail=shown, error=" ".join(f"{type(exc).__name__}: {exc}".split())[:300])
            return
        raised[server.url] = set(report.diagnosis.event_types)
        problems = [f.message for f in report.diagnosis.findings if f.problem]
        tau = f"τ {report.facts.tau:.2f}" if report.facts.tau is not None else "τ unknown"
        detail = f"{shown}: {report.facts.engine} {report.facts.engine_version or ''}, {tau}"
        if problems:
            self.say(f"{name} ({shown}): {problems[0]}")
            self.status(name, "problem", detail=detail, error=problems[0][:300])
        else:
            self.status(name, "healthy", detail=detail, success=True)

    def _demo(self) -> str:
        """Build the demo pairs and queue their measurements (the worker runs them); says what it queued."""
        queued = enqueue_demo(self.store, self.settings.models_dir, self.say,
                              max_new_tokens=self.settings.demo_max_new_tokens, repeats=self.settings.demo_repeats,
                              on_step=self.on_build_step)
        if queued:
            self.say(f"queued {queued} verification jobs on the tiny demo pairs")
            return f"built the demo pairs and queued {queued} verification jobs for the worker"
        return "demo pairs built; their verification jobs were already queued"

    def close(self) -> bool:
        """Stop every part; whether all of them did (one inside a long native call, such as torch building the
        demo models, cannot be interrupted and is still running)."""
        self.stop.set()
        stop_process(self.dashboard)  # type: ignore[arg-type]
        for thread in self.threads:
            thread.join(timeout=self.join_timeout_s)
        # `drafters status` must not show a stopped service as running: a part still inside its work (a job, a
        # demo build) ends with this process, so it is recorded stopped here, saying what was cut short.
        for thread in self.threads:
            if thread.name not in self.ended:
                self.status(thread.name, "stopped", detail="stopped with drafters up"
                            + (" in the middle of its work" if thread.is_alive() else ""))
        if self.downloading:
            self.status("download", "stopped", detail="stopped with drafters up before the download completed")
        return not any(thread.is_alive() for thread in self.threads)
