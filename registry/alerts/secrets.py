"""Webhook secrets live in a file only the user can read, never in the database, logs or output."""

from __future__ import annotations

import json
import os
from pathlib import Path


class SecretBox:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text() or "{}")

    def _write(self, values: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        # Created 0600 before any byte is written, then renamed over the old file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(values, handle)
        os.replace(tmp, self.path)

    def put(self, key: str, secret: str) -> None:
        self._write({**self._read(), key: secret})

    def get(self, key: str) -> str | None:
        return self._read().get(key)

    def delete(self, key: str) -> None:
        values = self._read()
        if values.pop(key, None) is not None:
            self._write(values)
