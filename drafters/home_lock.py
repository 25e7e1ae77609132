"""One `drafters up` per home: a lock file in `$DRAFTERS_HOME` that says who holds it.

Two services on one home would share its status rows, its watch lease owner (registry.watch.poller.stable_owner
is a function of host and home), its download folder and its ports. The lock is an `flock` on
`$DRAFTERS_HOME/up.lock`, held by the open file for the life of the process: the kernel releases it when the
process ends however it ends (SIGKILL included), so a stale file never blocks a restart. The file records the
holder (pid, host, start time) so that a second `up` can say who holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from registry.errors import Failed

LOCK_NAME = "up.lock"


class HomeInUse(Failed):
    """Another `drafters up` holds this home (exit status 1); the message names it."""


@dataclass
class HomeLock:
    """The held lock; `release` (or the process's end) frees it."""

    path: Path
    handle: IO[str]

    def release(self) -> None:
        self.handle.close()


def _holder(path: Path) -> str:
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {int(facts['pid'])} on {str(facts['host'])[:100]}, started {str(facts['started_at'])[:40]}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said who it is yet"


def acquire(home: Path) -> HomeLock:
    """Take this home's lock, or raise HomeInUse naming the process that holds it."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / LOCK_NAME
    handle = os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+", encoding="utf-8")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise HomeInUse(f"another `drafters up` is running on {home}: {_holder(path)} (lock {path}); stop it "
                        "first, or give this one its own DRAFTERS_HOME") from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "started_at": datetime.now(UTC).isoformat(timespec="seconds")}))
    handle.flush()
    return HomeLock(path, handle)
