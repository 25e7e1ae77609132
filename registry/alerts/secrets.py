"""Webhook secrets live in a file only the user can read, never in the database, logs or output.

Several processes write the file (`drafters subscribe` while `drafters up` runs, two subscribes at once): every
read-modify-write holds an exclusive lock on a lock file beside it, and the new content is written to a temporary
file (0600 before any byte) and renamed over the old one, so a reader sees the old file or the new one, never half.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from registry.files import write_private


class SecretBox:
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _read(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text() or "{}")

    def _write(self, values: dict[str, str]) -> None:
        write_private(self.path, json.dumps(values).encode())

    def put(self, key: str, secret: str) -> None:
        with self._locked():
            self._write({**self._read(), key: secret})

    def get(self, key: str) -> str | None:
        return self._read().get(key)

    def delete(self, key: str) -> None:
        with self._locked():
            values = self._read()
            if values.pop(key, None) is not None:
                self._write(values)
