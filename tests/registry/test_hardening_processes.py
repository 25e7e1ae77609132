"""No orphaned processes: `drafters up` and `drafters dashboard` take their Streamlit child with them when stopped
(SIGTERM) or killed (SIGKILL), and `drafters serve` its API workers (`up` its API process too); llama-server stays on loopback behind a key; the llama.cpp converter never sees a
folder that carries its publisher's code."""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from drafters.api import workers as workers_module
from registry.domain.json_shapes import SCHEMA_VERSION
from tests.support.cli import drafters, popen, start

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "data" / "configs"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout_s: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


def _start(args: list[str], home: Path) -> tuple[subprocess.Popen[str], list[int]]:
    env = {"DRAFTERS_HOME": str(home), "DRAFTERS_DASHBOARD_PORT": str(_free_port()), "DRAFTERS_WATCHED_ORGS": "[]"}
    process = start(args, until="dashboard: http://127.0.0.1:", env=env, drop=["DRAFTERS_DATABASE_URL"],
                    required=True).process
    deadline = time.monotonic() + 30
    while not (children := _children(process.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children, "the dashboard child did not start"
    return process, children


@pytest.mark.parametrize("command", [["up", "--no-watch", "--no-worker", "--no-demo"], ["dashboard"]])
def test_sigterm_stops_the_dashboard_child(tmp_path: Path, command: list[str]) -> None:
    process, children = _start(command, tmp_path / "home")
    try:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, output
        assert _wait_gone(children) == []
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_sigkill_of_up_still_stops_the_dashboard_child(tmp_path: Path) -> None:
    process, children = _start(["up", "--no-watch", "--no-worker", "--no-demo"], tmp_path / "home")
    try:
        process.kill()
        process.communicate(timeout=60)
        assert _wait_gone(children) == [], "the kernel's parent-death signal should have stopped it"
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


def _serve(home: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    process = popen(["serve", "--port", "0", "--workers", str(workers)], env={"DRAFTERS_HOME": str(home)},
                    drop=["DRAFTERS_DATABASE_URL", "DRAFTERS_HUB_WEBHOOK_SECRET"])
    assert process.stdout is not None
    seen = []
    while not (line := process.stdout.readline()).startswith("API listening on"):
        seen.append(line)
        assert line, "".join(seen)
    return process, line.strip().rsplit(" ", 1)[-1].rstrip("/")


def _wait_children(pid: int, count: int, timeout_s: float = 30) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while len(children := [c for c in _children(pid) if _alive(c)]) != count and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(children) == count, children
    return children


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_api_workers_share_the_port_and_go_with_the_parent(tmp_path: Path, how: signal.Signals) -> None:
    process, url = _serve(tmp_path / "home", 2)
    workers = _wait_children(process.pid, 2)
    try:
        for _ in range(10):
            assert httpx.get(f"{url}/health", timeout=30).json()["status"] == "ok"
        process.send_signal(how)
        process.communicate(timeout=60)
        if how == signal.SIGTERM:
            assert process.returncode == 0
        assert _wait_gone(workers) == [], "the workers outlived `drafters serve`"
    finally:
        for pid in [process.pid, *workers]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_dead_api_worker_is_replaced(tmp_path: Path) -> None:
    process, url = _serve(tmp_path / "home", 2)
    workers = _wait_children(process.pid, 2)
    replaced: list[int] = []
    try:
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (replaced := [c for c in _children(process.pid)
                                                                if _alive(c) and c not in workers]):
            time.sleep(0.1)
        assert replaced, "no new worker after one was killed"
        for _ in range(10):
            assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    finally:
        process.terminate()
        process.communicate(timeout=60)
        assert _wait_gone([*workers, *replaced]) == []


def test_api_workers_that_die_at_start_are_not_forked_forever(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that cannot start (its database gone, a bad setting) dies young again and again: the parent waits
    longer each time, then stops with an error instead of forking a new one every second forever."""
    monkeypatch.setattr(workers_module, "RESTART_DELAY_S", 0.2)
    started: list[float] = []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))

    def cannot_start() -> None:
        raise RuntimeError("the database is gone")

    real_fork = workers_module._fork

    def counted_fork(serve):  # type: ignore[no-untyped-def]
        started.append(time.monotonic())
        return real_fork(serve)

    monkeypatch.setattr(workers_module, "_fork", counted_fork)
    with pytest.raises(workers_module.WorkersFailing, match="5 times in a row"):
        workers_module.serve_forked(cannot_start, sock, 1)
    assert len(started) == workers_module.MAX_QUICK_DEATHS
    gaps = [b - a for a, b in zip(started, started[1:])]
    # Delays of 0.2, 0.4, 0.8 and 1.6 s (plus the parent's 0.2 s poll): the last wait is 1.4 s longer than the first.
    assert gaps == sorted(gaps) and gaps[-1] - gaps[0] > 1.0, gaps


def test_sigkill_of_up_stops_the_api_and_its_workers(tmp_path: Path) -> None:
    env = {"DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_DASHBOARD_PORT": str(_free_port()),
           "DRAFTERS_API_PORT": str(_free_port()), "DRAFTERS_WATCHED_ORGS": "[]"}
    process = popen(["up", "--no-watch", "--no-worker", "--no-demo"], env=env, drop=["DRAFTERS_DATABASE_URL"])
    assert process.stdout is not None
    seen = []
    while "API: http" not in (line := process.stdout.readline()):
        seen.append(line)
        assert line, "".join(seen)
    url = line.split("API: ", 1)[1].split("/ ", 1)[0]
    descendants: list[int] = []
    try:
        assert httpx.get(f"{url}/v1/lag", timeout=30).json()["schema_version"] == SCHEMA_VERSION
        deadline = time.monotonic() + 30
        # the dashboard, `drafters serve` and its (at least one) worker: the API runs as processes of its own
        while len(descendants := [p for p in _descendants(process.pid) if _alive(p)]) < 3 \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(descendants) >= 3, descendants
        process.kill()
        process.communicate(timeout=60)
        assert _wait_gone(descendants) == [], "the kernel's parent-death signal should have stopped them"
    finally:
        for pid in descendants:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# ---- llama-server's arguments and the converter's refusals ------------------------------------------------------

def test_llamacpp_args_cannot_move_the_server_off_loopback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from verifier.engines.llamacpp.install import ServerBinary
    from verifier.engines.llamacpp.server import LlamaCppOptions, LlamaServer

    for hostile in ("--host 0.0.0.0", "--port=80", "-ngl 99 --api-key x"):
        monkeypatch.setenv("DRAFTERS_LLAMACPP_ARGS", hostile)
        with pytest.raises(ValueError, match="may not set"):
            LlamaCppOptions.from_env()
    monkeypatch.setenv("DRAFTERS_LLAMACPP_ARGS", "-ngl 99")
    assert LlamaCppOptions.from_env().extra_args == ("-ngl", "99")
    # Options built in code cannot either: loopback, the port and the key file are the last word.
    sneaky = LlamaCppOptions(extra_args=("-ngl", "99", "--host=0.0.0.0", "--api-key", "known"))
    binary = ServerBinary(path=tmp_path / "llama-server", version="11434.0.0", build=11434, backend="cpu")
    server = LlamaServer(binary=binary, model=tmp_path / "m.gguf", draft=None, ctx_size=256, options=sneaky)
    args = server.arguments(8123, tmp_path / "key")
    assert args[-6:] == ["--host", "127.0.0.1", "--port", "8123", "--api-key-file", str(tmp_path / "key")]
    assert "--host=0.0.0.0" not in args and "-ngl" in args


def test_the_converter_refuses_folders_with_publisher_code(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_bytes((CONFIGS / "Qwen__Qwen3-8B.json").read_bytes())
    (target / "model.safetensors").write_bytes(b"")
    gguf = functools.partial(drafters, "gguf", str(target), "--out", str(tmp_path / "o"),
                             env={"DRAFTERS_HOME": str(tmp_path / "home")})

    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": "m.M"}}))
    refused = gguf()
    assert refused.returncode == 2 and "config.json points at the publisher's own code" in refused.stderr
    (target / "config.json").write_text(json.dumps(config))
    (target / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["t.T", None]}}))
    refused = gguf()
    assert refused.returncode == 2 and "tokenizer_config.json points at" in refused.stderr
    (target / "tokenizer_config.json").unlink()
    (target / "sub").mkdir()
    (target / "sub" / "tokenization_evil.py").write_text("raise SystemExit('ran')\n")
    refused = gguf()
    assert refused.returncode == 2 and "sub/tokenization_evil.py" in refused.stderr
    for result in (refused,):
        assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_llama_server_answers_only_with_its_key(tmp_path: Path) -> None:
    """A real llama-server (the llamacpp extra) on the tiny target: loopback, and /metrics refused without the key."""
    import httpx

    from tests.llamacpp import skip_unless_wanted
    from tests.tiny_models import cache_root
    from verifier.engines.llamacpp.convert import cached_gguf
    from verifier.engines.llamacpp.install import fetch_llama_cpp_source, find_server
    from verifier.engines.llamacpp.server import LlamaServer
    from verifier.tiny.qwen3 import cached_target

    skip_unless_wanted()
    binary = find_server()
    source = fetch_llama_cpp_source(cache_root(), binary.version)
    target = cached_gguf(cached_target(cache_root()), cache_root() / "gguf", source=source, build=binary.build,
                         outtype="f32")
    server = LlamaServer(binary=binary, model=target.path, draft=None, ctx_size=256, log_dir=tmp_path)
    with server:
        assert server.url.startswith("http://127.0.0.1:")
        with httpx.Client(trust_env=False, timeout=10) as anonymous:
            assert anonymous.get(f"{server.url}/metrics").status_code == 401
            assert anonymous.get(f"{server.url}/health").status_code == 200  # public by design
        assert server.counters() is not None  # the engine's own client carries the key
        key_file = next(tmp_path.glob("llama-server-*.key"))
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"
