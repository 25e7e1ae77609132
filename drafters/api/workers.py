"""`drafters serve --workers N`: N uvicorn processes accepting on one listening socket.

One Python process answers on one core at most (the GIL), so the API's throughput on a machine with several
cores needs several processes. The parent binds the socket, then forks the workers before it has started any
thread or opened any database connection; each worker builds its own app (its own read-only engine and body
cache) and runs one uvicorn server on the inherited socket, and the kernel hands each accepted connection to one
of them. Fork rather than uvicorn's `--workers` (multiprocessing spawn of an import string): the app is built
from the parent's settings as they are, and each worker can be tied to the parent's life before it serves.

No orphans: each worker asks the kernel for SIGTERM when the parent dies (even of SIGKILL; PR_SET_PDEATHSIG,
registry/processes.py). The parent stops the workers on SIGTERM or SIGINT (SIGTERM, then SIGKILL after a grace)
and starts a new one when one dies: at once after a worker that served a while, after a doubling delay after one
that died young, and not at all after `MAX_QUICK_DEATHS` young deaths in a row (a worker that cannot start, e.g.
its database is gone, would otherwise be forked forever): `serve_forked` then raises `WorkersFailing`.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable

from registry.errors import Failed
from registry.processes import die_with_parent

STOP_GRACE_S = 10.0
RESTART_DELAY_S = 1.0  # after a young death; doubled for each young death in a row, up to MAX_RESTART_DELAY_S
MAX_RESTART_DELAY_S = 30.0
YOUNG_S = 10.0  # a worker that dies sooner than this did not get to serve
MAX_QUICK_DEATHS = 5
MAX_DEFAULT_WORKERS = 8


class WorkersFailing(Failed):
    """Every new API worker dies at start; the parent stops instead of forking them forever."""


def default_workers() -> int:
    """One worker per core this process may run on (the load generator and the database share them too)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


def _fork(serve: Callable[[], None]) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid != 0:
        return pid
    code = 1
    try:
        die_with_parent(signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the kernel was asked to tell us
            os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        serve()  # uvicorn installs its own SIGTERM/SIGINT handlers: a graceful stop
        code = 0
    except BaseException:  # noqa: BLE001 - a worker reports and exits; the parent starts another
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve_forked(serve: Callable[[], None], sock: socket.socket, workers: int) -> None:
    """Run `serve` (one uvicorn server on `sock`) in `workers` forked processes until SIGTERM or SIGINT."""
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    children: dict[int, float] = {}  # pid -> when it was started
    quick_deaths = 0

    def start() -> None:
        children[_fork(serve)] = time.monotonic()

    try:
        for _ in range(workers):
            start()
        while not stopping:
            pid, _status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.2)
                continue
            started = children.pop(pid, time.monotonic())
            if stopping:
                break
            quick_deaths = quick_deaths + 1 if time.monotonic() - started < YOUNG_S else 0
            if quick_deaths >= MAX_QUICK_DEATHS:
                raise WorkersFailing(f"API workers died within {YOUNG_S:.0f} s of starting {quick_deaths} times in a "
                                     "row (their errors are above); stopping the API")
            delay = min(RESTART_DELAY_S * 2 ** max(quick_deaths - 1, 0), MAX_RESTART_DELAY_S) if quick_deaths else 0
            print(f"API worker {pid} exited; starting another" + (f" in {delay:.0f} s" if delay else ""),
                  file=sys.stderr, flush=True)
            deadline = time.monotonic() + delay
            while not stopping and time.monotonic() < deadline:
                time.sleep(0.1)
            if not stopping:
                start()
    finally:
        _stop_all(children)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


def _stop_all(started: dict[int, float]) -> None:
    children = set(started)
    for pid in children:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while children and time.monotonic() < deadline:
        for pid in list(children):
            if os.waitpid(pid, os.WNOHANG)[0] != 0:
                children.discard(pid)
        time.sleep(0.05)
    for pid in children:
        _signal(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
