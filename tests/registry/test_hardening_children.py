"""Child processes and ports of `drafters up`: the GGUF converter dies with its parent (SIGTERM or SIGKILL); a
dashboard port another process listens on is never advertised; `up` stopped with SIGTERM while torch builds the
demo models exits 0 without the C++ runtime's "terminate called without an active exception"."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.cli import drafters, running, start

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "data" / "configs"


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(condition, timeout_s: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


# ---- the GGUF converter -----------------------------------------------------------------------------------------

# A stand-in for llama.cpp's convert_hf_to_gguf.py that says where it is and then takes its time, as the real one
# does on a large model; it ignores SIGTERM, as a converter in the middle of writing may.
SLOW_CONVERTER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(os.environ["CONVERTER_PID_FILE"], "w").write(str(os.getpid()))
time.sleep(600)
"""

PARENT = """
import sys
from pathlib import Path
from verifier.engines.llamacpp.convert import convert_to_gguf
convert_to_gguf(Path(sys.argv[1]), Path(sys.argv[2]), source=Path(sys.argv[3]))
"""


@pytest.mark.parametrize("parent_signal", [signal.SIGKILL, signal.SIGTERM])
def test_the_converter_dies_with_its_parent(tmp_path: Path, parent_signal: signal.Signals) -> None:
    source, model = tmp_path / "llama.cpp", tmp_path / "model"
    source.mkdir()
    (source / "convert_hf_to_gguf.py").write_text(SLOW_CONVERTER)
    model.mkdir()
    (model / "config.json").write_bytes((CONFIGS / "Qwen__Qwen3-8B.json").read_bytes())
    (model / "model.safetensors").write_bytes(b"\0" * 16)
    pid_file = tmp_path / "converter.pid"
    env = {**os.environ, "CONVERTER_PID_FILE": str(pid_file),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(model), str(tmp_path / "out.gguf"), str(source)],
                              env=env)
    converter = 0
    try:
        assert _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip()), "the converter never started"
        converter = int(pid_file.read_text())
        assert _alive(converter)
        parent.send_signal(parent_signal)
        parent.wait(timeout=30)
        assert _wait_for(lambda: not _alive(converter), timeout_s=15), "the converter outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if converter and _alive(converter):
            os.kill(converter, signal.SIGKILL)


# ---- the dashboard port -----------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _health(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def test_up_moves_the_dashboard_off_a_port_another_process_listens_on(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        with running(["up", "--no-watch", "--no-worker", "--no-demo"], until="dashboard: http",
                     env={"DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_DASHBOARD_PORT": str(taken)}) as up:
            lines = up.lines
            advertised = next(line for line in lines if line.startswith("dashboard:"))
            assert f"port {taken} is taken" in "".join(lines), lines
            assert f":{taken}/" not in advertised
            port = int(advertised.split("http://127.0.0.1:")[1].split("/")[0])
            # The advertised URL is our dashboard's.
            assert _wait_for(lambda: _health(port) == "ok", timeout_s=120), "".join(lines)
        assert up.process.returncode == 0, up.output


def test_dashboard_refuses_a_port_another_process_listens_on(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        result = drafters("dashboard", "--port", str(taken), env={"DRAFTERS_HOME": str(tmp_path / "home")},
                          timeout=60)
    assert result.returncode == 2 and f"port {taken} on 127.0.0.1 is taken" in result.stderr, result.stderr


# ---- SIGTERM during the demo build -------------------------------------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the demo build needs the verifier extra")
def test_up_stopped_during_the_demo_build_exits_cleanly(tmp_path: Path) -> None:
    up = start(["up", "--no-watch", "--no-worker", "--no-dashboard"], until="building the tiny demo models",
               env={"DRAFTERS_HOME": str(tmp_path / "home"),
                    # An empty models folder: the build starts from nothing and runs for minutes.
                    "DRAFTERS_MODELS_DIR": str(tmp_path / "models")})
    process, lines = up.process, up.lines
    try:
        # Into the build: torch has started its threads.
        assert _wait_for(lambda: any((tmp_path / "models").glob("*.building")), timeout_s=60), lines
        time.sleep(2)
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    output = "".join(lines) + rest
    assert "terminate called" not in output, output
    assert process.returncode == 0, output
    assert "stopping" in output
    # Nothing half-built is left as if it were complete.
    assert not [p for p in (tmp_path / "models").iterdir() if p.is_dir() and not p.name.endswith(".building")]
