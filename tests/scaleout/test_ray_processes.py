"""No orphaned Ray processes: `drafters worker --executor ray` starts a local Ray instance (gcs_server, raylet, its
workers, monitors, agents); stopping the worker with SIGTERM leaves none of them running, and killing it takes Ray's
daemons with it. Each case starts a real Ray instance (about 15 s on two cores)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import start

pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'drafter-registry[ray]'")


def _parents() -> dict[int, int]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


def _descendants(pid: int) -> set[int]:
    parents, found, frontier = _parents(), set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _mentioning(text: str) -> set[int]:
    """Processes whose command line names `text` (Ray passes its session folder to each of its daemons)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def _left(pids: set[int], ray_dir: str, timeout_s: float = 60) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = {p for p in pids | _mentioning(ray_dir) if _alive(p)}
        if not left:
            return left
        time.sleep(0.5)
    return left


@pytest.fixture
def ray_dir() -> Iterator[str]:
    # Short: Ray's Unix socket paths live under it and must stay under the 107-byte limit.
    path = tempfile.mkdtemp(prefix="drt", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _start_worker(home: Path, ray_dir: str) -> tuple[subprocess.Popen[str], set[int], list[str]]:
    worker = start(["worker", "--executor", "ray"], until="waiting for jobs", required=True,
                   env={"DRAFTERS_HOME": str(home), "RAY_TMPDIR": ray_dir},
                   # A local instance, started by the worker itself.
                   drop=["RAY_ADDRESS", "DRAFTERS_DATABASE_URL"])
    process, lines = worker.process, worker.lines
    deadline = time.monotonic() + 30
    # gcs_server and raylet are there once ray.init returns; wait for raylet's first workers too.
    while len(ray := _descendants(process.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    names = [Path(f"/proc/{p}/comm").read_text().strip() for p in ray if _alive(p)]
    assert {"gcs_server", "raylet"} <= set(names), names
    return process, ray, lines


def _kill_left(pids: set[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_stops_the_worker_and_its_ray_instance(tmp_path: Path, ray_dir: str) -> None:
    process, ray, _ = _start_worker(tmp_path / "home", ray_dir)
    try:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=120)
        assert process.returncode == 0, output
        assert "stopping" in output
        assert _left(ray, ray_dir) == set()
    finally:
        _kill_left(ray | _mentioning(ray_dir))


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_sigkill_of_the_worker_still_stops_its_ray_daemons(tmp_path: Path, ray_dir: str) -> None:
    process, ray, _ = _start_worker(tmp_path / "home", ray_dir)
    try:
        process.kill()
        process.communicate(timeout=60)
        # gcs_server, raylet, the monitors and the task workers go with the process (Ray starts them with a
        # parent-death signal). Raylet's two agents are not bound so: once raylet is gone they retry the dead GCS
        # for about a minute, then exit by themselves (measured: gone 70-100 s after the kill).
        agents = {p for p in ray if _name(p) in ("ray::DashboardA", "ray::RuntimeEnv")}
        assert _left(ray - agents, ray_dir) - agents == set()
    finally:
        _kill_left(ray | _mentioning(ray_dir))
