"""Run the `drafters` command as a user does: a real process, output captured, a wide terminal."""

from __future__ import annotations

import os
import subprocess
import sys


def drafters(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "drafters.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        timeout=120,
    )
