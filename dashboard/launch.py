"""Start the dashboard as its own process: `streamlit run` on the installed copy of dashboard/app.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import IO

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from registry.errors import UserError
from registry.processes import die_with_parent


def app_path() -> Path:
    """app.py of the installed `dashboard` package (works from a wheel as well as from a checkout)."""
    return Path(str(resources.files("dashboard").joinpath("app.py")))


class LaunchError(UserError, ValueError):
    """A port or database URL the dashboard cannot start with; the message is one line for the user."""


def port_taken(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:port (SO_REUSEADDR: a closed socket in TIME_WAIT is not
    a listener, and Streamlit binds with it too). A port out of range is left for `command` to refuse."""
    if not 1 <= port <= 65535:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def command(port: int, database_url: str | None = None) -> list[str]:
    """The `streamlit run` command line, after checking the port and the database URL.

    The URL itself is not on the command line, where any user of the machine could read its password in the
    process list: `launch` hands it to the process in its environment."""
    if not 1 <= port <= 65535:
        raise LaunchError(f"port must be between 1 and 65535, got {port}")
    if database_url is not None:
        try:
            make_url(database_url)
        except ArgumentError:
            # The URL is not echoed: it may hold a password.
            raise LaunchError("not a database URL (expected sqlite:///PATH or postgresql+psycopg://…)") from None
    return [
        sys.executable, "-m", "streamlit", "run", str(app_path()),
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false",
        # A read-only registry for its users: no "Deploy" button, no developer menu (rerun, clear cache).
        "--client.toolbarMode", "viewer",
    ]


def launch(
    port: int,
    database_url: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    stdout: IO[bytes] | int | None = None,
    stderr: IO[bytes] | int | None = None,
) -> subprocess.Popen[bytes]:
    """Run the dashboard on 127.0.0.1:port in a new process.

    `env` is its environment (default: this process's); `database_url`, when given, overrides
    DRAFTERS_DATABASE_URL in it."""
    argv = command(port, database_url)
    environment = dict(os.environ if env is None else env)
    if database_url is not None:
        environment["DRAFTERS_DATABASE_URL"] = database_url
    # The dashboard stops with whoever started it, even a parent killed with SIGKILL (Linux).
    return subprocess.Popen(argv, env=environment, stdout=stdout, stderr=stderr,
                            preexec_fn=die_with_parent)  # noqa: PLW1509 - only prctl, before exec
