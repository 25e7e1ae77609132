"""`drafters up`: the long-running service on one machine — watcher, alert delivery, feed, worker, dashboard.

Each part runs in its own thread (the dashboard in its own process) and survives the others' failures; parts
whose extras are not installed are skipped with one line saying so.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from registry import alerts
from registry.catalog_import import load_catalog
from registry.feed import write_feed
from registry.secrets import SecretBox
from registry.settings import Settings
from registry.store import Store

log = logging.getLogger(__name__)


@dataclass
class Service:
    settings: Settings
    store: Store
    say: Callable[[str], None]
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    dashboard: object | None = None  # subprocess.Popen when started
    hub_reachable: bool | None = None

    def start(self, *, watch: bool = True, worker: bool = True, dashboard: bool = True, demo: bool = True) -> None:
        summary = load_catalog(self.store)
        self.say(f"database {self.settings.resolved_database_url} at head; catalog: {summary.drafters} drafters "
                 f"({summary.dflash_21} DFlash v1), {summary.targets} targets")
        if dashboard:
            self._start_dashboard()
        if watch:
            self._thread("watcher", self._watch_loop)
        self._thread("alerts", self._alerts_loop)
        verifier_installed = importlib.util.find_spec("torch") is not None
        if worker and verifier_installed:
            self._thread("worker", self._worker_loop)
        elif worker:
            self.say("verifier extra not installed: no worker (pip install 'drafter-registry[verifier]')")
        if demo and verifier_installed:
            self._thread("demo", self._demo)

    def _thread(self, name: str, target: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                target()
            except Exception as exc:  # noqa: BLE001 - one part failing must not take the service down
                log.exception("%s stopped", name)
                self.say(f"{name} stopped: {exc}")

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _start_dashboard(self) -> None:
        from dashboard.launch import launch

        log_path = self.settings.home_dir / "dashboard.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as sink:
            self.dashboard = launch(self.settings.dashboard_port, self.settings.resolved_database_url,
                                    stdout=sink, stderr=sink)
        self.say(f"dashboard: http://127.0.0.1:{self.settings.dashboard_port}/ (log: {log_path})")

    def _watch_loop(self) -> None:
        from registry.hub import HubClient
        from registry.watch import Watcher

        client = HubClient(self.settings.hub_endpoint, self.settings.token_value(), self.settings.hub_cache_dir,
                           timeout=self.settings.hub_timeout_s)
        watcher = Watcher(self.store, client, list(self.settings.watched_orgs),
                          on_pair=self._on_pair if importlib.util.find_spec("torch") else None)
        while not self.stop.is_set():
            # Another watcher on the same database that polled an org this interval spares us that org.
            report = watcher.poll_once(skip_if_polled_within_s=self.settings.watch_interval_s / 2)
            reachable = not report.unreachable
            # Said once per change, not once per poll: an offline machine hears it one time.
            if reachable != self.hub_reachable:
                if reachable:
                    self.say(f"watching {len(report.orgs)} orgs on {self.settings.hub_endpoint}")
                else:
                    self.say(f"the Hub at {self.settings.hub_endpoint} cannot be reached ({report.unreachable}); "
                             "going on with what the registry has")
                self.hub_reachable = reachable
            for event in report.events:
                self.say(f"[{event.type}] {event.payload.get('message', event.subject)}")
            self.stop.wait(self.settings.watch_interval_s)

    def _on_pair(self, drafter: str, drafter_sha: str, target: str, target_sha: str, verdict: str) -> None:
        from verifier.jobs import enqueue_cached_pair

        job = enqueue_cached_pair(self.store, drafter, drafter_sha, target, target_sha)
        if job is not None:
            self.say(f"queued a measurement of {drafter} on {target} ({verdict}); its weights are in the local cache")

    def _alerts_loop(self) -> None:
        secrets = SecretBox(self.settings.home_dir / "secrets.json")
        feed_path = self.settings.home_dir / "feed.atom"
        while not self.stop.is_set():
            alerts.deliver_pending(self.store, secrets)
            write_feed(self.store.events(), feed_path)
            self.stop.wait(30.0)

    def _worker_loop(self) -> None:
        from verifier.jobs import Worker

        worker = Worker(self.store)

        def report(job: object) -> None:
            self.say(f"verify job {job.id}: {job.status}" + (f" ({job.error})" if job.error else ""))  # type: ignore[attr-defined]

        worker.run_forever(self.stop, on_job=report)

    def _demo(self) -> None:
        from verifier.demo import enqueue_demo

        queued = enqueue_demo(self.store, self.settings.models_dir, self.say,
                              max_new_tokens=self.settings.demo_max_new_tokens, repeats=self.settings.demo_repeats)
        if queued:
            self.say(f"queued {queued} verification jobs on the tiny demo pairs")

    def close(self) -> None:
        self.stop.set()
        if self.dashboard is not None:
            self.dashboard.terminate()  # type: ignore[attr-defined]
        for thread in self.threads:
            thread.join(timeout=5)
