"""`drafters up` (the service), and the parts a user starts alone: the dashboard and the demo pairs."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dashboard.launch import LaunchError, launch, port_taken
from drafters import home_lock
from drafters.cli import render
from drafters.cli.common import Failed, UserError, app, open_store
from drafters.cli.runs_view import print_runs
from drafters.cli.verifying import run_with_progress
from drafters.service import Service
from registry.processes import stop as stop_process
from registry.settings import get_settings
from verifier.demo import StepReport, build_demo_models, demo_requests, enqueue_demo


class TrainingBars:
    """A demo build's training on a terminal: a bar for the model in training, gone once it is trained (the "built
    in N s" line follows). Lines printed meanwhile (the service's) appear above it."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.model = 0

    def __call__(self, number: int, models: int, label: str, step: int, steps: int) -> None:
        if self.progress is None or number != self.model:
            self.close()
            self.model = number
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=self.console, transient=True)
            self.progress.add_task(render.plain(f"demo model {number} of {models}, {label}: training steps"),
                                   total=steps or None)
            self.progress.start()
        self.progress.update(self.progress.task_ids[0], completed=step)
        if steps and step >= steps:
            self.close()

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def training_progress(console: Console) -> StepReport | None:
    """Bars on a terminal; elsewhere (a log, a pipe) None: the build prints a line at each quarter of its steps."""
    return TrainingBars(console) if console.is_terminal else None


@app.command("dashboard")
def dashboard_command(port: Annotated[int | None, typer.Option(help="Port on 127.0.0.1.")] = None) -> None:
    """Serve the Streamlit dashboard (read-only) on 127.0.0.1."""
    settings = get_settings()
    open_store()  # the schema is brought to head before the read-only dashboard looks at it
    chosen = port or settings.dashboard_port
    if port_taken(chosen):
        raise UserError(f"port {chosen} on 127.0.0.1 is taken by another process; choose another with --port")
    stopping: list[float] = []
    # Installed before the child starts and before the address is printed: a supervisor that reads the line and
    # stops us at once must not meet Python's default handler (exit -15, the child orphaned).
    previous = signal.signal(signal.SIGTERM, lambda *_: stopping.append(time.monotonic()))
    try:
        process = launch(chosen, settings.resolved_database_url)
    except LaunchError:
        signal.signal(signal.SIGTERM, previous)
        raise
    render.console.print(f"dashboard: http://127.0.0.1:{chosen}/")
    terminated = False
    try:
        # The handler only records the signal; terminating here, not inside it, keeps Popen's lock uncontended.
        while (code := process.poll()) is None:
            if stopping and not terminated:
                process.terminate()
                terminated = True
            if stopping and time.monotonic() - stopping[0] > 10:
                process.kill()
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop_process(process)
        return
    finally:
        signal.signal(signal.SIGTERM, previous)
    if code != 0 and not stopping:
        raise Failed(f"the dashboard (streamlit) exited with status {code}; its output is above")


@app.command("demo")
def demo_command(
    run: Annotated[bool, typer.Option("--run", help="Measure now instead of queueing for a worker.")] = False,
) -> None:
    """Build the tiny demo pairs (Qwen3 + draft LM + DFlash, Gemma-4 + assistant) and measure them."""
    store = open_store()
    say = lambda line: render.console.print(render.strip_control(line), soft_wrap=True, markup=False,  # noqa: E731
                                           highlight=False)
    settings = get_settings()
    if not run:
        queued = enqueue_demo(store, settings.models_dir, say, max_new_tokens=settings.demo_max_new_tokens,
                              repeats=settings.demo_repeats, on_step=training_progress(render.console))
        render.console.print(f"queued {queued} new jobs; `drafters worker --once` runs them")
        return
    models = build_demo_models(settings.models_dir, say, training_progress(render.console))
    requests = demo_requests(models, max_new_tokens=settings.demo_max_new_tokens, repeats=settings.demo_repeats)
    records = [run_with_progress(store, request, key) for key, request in requests]
    print_runs(records)


@app.command("up")
def up(
    watch: Annotated[bool, typer.Option(help="Poll the Hub.")] = True,
    worker: Annotated[bool, typer.Option(help="Run verification jobs.")] = True,
    dashboard: Annotated[bool, typer.Option(help="Serve the dashboard.")] = True,
    demo: Annotated[bool, typer.Option(help="Build the tiny demo pairs and measure them once.")] = True,
    api: Annotated[bool, typer.Option(help="Serve the read-only JSON API (DRAFTERS_API_PORT).")] = True,
) -> None:
    """The main job: upgrade the database, load the catalog, then watch, deliver alerts, verify and serve. One
    per DRAFTERS_HOME: a second one says which process holds the home and exits 1."""
    settings = get_settings()
    lock = home_lock.acquire(settings.home_dir)  # before the database: two would upgrade and load it at once
    bars = training_progress(render.console)
    service = Service(settings, open_store(),
                      lambda line: render.console.print(render.strip_control(line), soft_wrap=True, markup=False,
                                                        highlight=False),
                      on_build_step=bars)
    # SIGTERM (systemd, docker stop, kill) stops the service as Ctrl-C does, so its children stop with it.
    previous = {sig: signal.signal(sig, lambda *_: service.stop.set()) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        service.start(watch=watch, worker=worker, dashboard=dashboard, demo=demo, api=api)
        service.stop.wait()
        render.console.print("stopping")
    except KeyboardInterrupt:
        render.console.print("stopping")
    finally:
        stopped = service.close()
        if isinstance(bars, TrainingBars):
            bars.close()  # a stop in the middle of a build leaves no bar drawn
        lock.release()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not stopped:
        # A part still inside torch (the demo build trains models) makes the interpreter's teardown abort with
        # "terminate called without an active exception" (exit 134). Everything else is stopped and its children
        # with it, and a build is only kept once complete: leave without that teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
