"""Files only their owner can read (0600 whatever the umask): the feed, the dashboard's log, webhook secrets.

os.open's mode is filtered by the umask, which can only take bits away, so a new file is 0600 or stricter; an older
file someone made readable is tightened with fchmod before anything is written to it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import BinaryIO

PRIVATE = 0o600


def write_private(path: Path, data: bytes) -> Path:
    """`data` into `path` at once: a unique temporary file (0600) beside it, then renamed over it, so that a reader
    sees the old file or the new one and never half of either."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, PRIVATE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def open_private_append(path: Path) -> BinaryIO:
    """`path` opened for appending, created 0600 (and made 0600 if it was not)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE)
    try:
        os.fchmod(fd, PRIVATE)
    except OSError:
        pass  # not ours to change; it is still only appended to
    return os.fdopen(fd, "ab")
