"""`drafters serve --workers N`: N uvicorn processes accepting on one listening socket.

One Python process answers on one core at most (the GIL), so the API's throughput on a machine with several
cores needs several processes. The parent binds the socket, then forks the workers before it has started any
thread or opened any database connection; each worker builds its own app (its own read-only engine and body
cache) and runs one uvicorn server on the inherited socket, and the kernel hands each accepted connection to one
of them. Fork rather than uvicorn's `--workers` (multiprocessing spawn of an import string): the app is built
from the parent's settings as they are, and each worker can be tied to the parent's life before it serves.

No orphans: each worker asks the kernel for SIGTERM when the parent dies (even of SIGKILL; PR_SET_PDEATHSIG,
registry/processes.py). The parent stops the workers on SIGTERM or SIGINT (SIGTERM, then SIGKILL after a grace)
and starts a new one when one dies.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable

from registry.processes import die_with_parent

STOP_GRACE_S = 10.0
RESTART_DELAY_S = 1.0
MAX_DEFAULT_WORKERS = 8


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
    children: set[int] = set()
    try:
        children.update(_fork(serve) for _ in range(workers))
        while not stopping:
            pid, _status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.2)
                continue
            children.discard(pid)
            if not stopping:
                print(f"API worker {pid} exited; starting another", file=sys.stderr, flush=True)
                time.sleep(RESTART_DELAY_S)
                if not stopping:
                    children.add(_fork(serve))
    finally:
        _stop_all(children)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()


def _stop_all(children: set[int]) -> None:
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
