"""The one way tests run `drafters`: a command to its end (a real process, output captured, a wide terminal; or
in-process through Typer's runner where a test patches the process it runs in), or a long-running command
(`up`, `dashboard`, `worker`) started and read until the line that says it is ready."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from drafters.cli import load_commands
from drafters.cli.common import app

COMMAND = [sys.executable, "-m", "drafters.cli"]
load_commands()  # `invoke` runs in this process: every command registered, as `main` does for the one asked


def environment(env: Mapping[str, str] | None = None, drop: Iterable[str] = ()) -> dict[str, str]:
    """This process's environment with `env` added and the variables named in `drop` taken out."""
    values = {**os.environ, **(env or {})}
    for name in drop:
        values.pop(name, None)
    return values


def drafters(*args: str, env: Mapping[str, str] | None = None, drop: Iterable[str] = (), cwd: Path | None = None,
             timeout: float = 120, columns: int = 200,
             preexec_fn: Callable[[], object] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one command to its end as a user does: exit status, stdout and stderr (`preexec_fn`: e.g. a umask)."""
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=environment({"COLUMNS": str(columns), **(env or {})}, drop),
                          preexec_fn=preexec_fn)  # noqa: PLW1509 - only where a test sets the child's umask


def invoke(*args: str) -> Result:
    """Run one command in this process (the test's monkeypatches apply); no exit-code mapping of `main`."""
    return CliRunner().invoke(app, list(args))


@dataclass
class Started:
    """A long-running command: its process, the lines read so far, and (once stopped) the rest of its output."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    rest: str = ""

    @property
    def output(self) -> str:
        return "".join(self.lines) + self.rest


def popen(args: Sequence[str], *, env: Mapping[str, str] | None = None, drop: Iterable[str] = (),
          preexec_fn: Callable[[], object] | None = None) -> subprocess.Popen[str]:
    """`drafters ARGS` started, stderr into stdout, read by the caller."""
    return subprocess.Popen([*COMMAND, *args], env=environment(env, drop), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=preexec_fn)  # noqa: PLW1509


def start(args: Sequence[str], *, until: str | None, env: Mapping[str, str] | None = None,
          drop: Iterable[str] = (), required: bool = False,
          preexec_fn: Callable[[], object] | None = None) -> Started:
    """Start `drafters ARGS` and read lines until one contains `until` (None: the first line).

    `env` is added to this process's environment, `drop` names variables taken out of it. `required`: fail the test
    when the output ends without that line."""
    process = popen(args, env=env, drop=drop, preexec_fn=preexec_fn)
    started = Started(process)
    assert process.stdout is not None
    for line in process.stdout:
        started.lines.append(line)
        if until is None or until in line:
            break
    else:
        if required:
            stop(process)
            pytest.fail(f"no line with {until!r}:\n" + "".join(started.lines))
    return started


def stop(process: subprocess.Popen, timeout: float = 60, *, read: bool = True) -> str:  # type: ignore[type-arg]
    """Terminate a process a test started and wait for it (killed after `timeout`); what it still printed.

    `read=False` when another thread reads its output: then only its end is awaited."""
    process.terminate()
    try:
        return _end(process, timeout, read)
    except subprocess.TimeoutExpired:
        process.kill()
        return _end(process, None, read)


def _end(process: subprocess.Popen, timeout: float | None, read: bool) -> str:  # type: ignore[type-arg]
    if not read:
        process.wait(timeout=timeout)
        return ""
    rest = process.communicate(timeout=timeout)[0]
    return rest if isinstance(rest, str) else ""


@contextmanager
def running(args: Sequence[str], *, until: str | None, env: Mapping[str, str] | None = None,
            drop: Iterable[str] = (), preexec_fn: Callable[[], object] | None = None) -> Iterator[Started]:
    """`start`, then `stop` on the way out whatever happened; `rest` holds what it printed after the line."""
    started = start(args, until=until, env=env, drop=drop, preexec_fn=preexec_fn)
    try:
        yield started
    finally:
        started.rest = stop(started.process)
