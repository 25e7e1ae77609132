"""The push endpoint under bad input: lengths that are not lengths, bodies too big or too deep, idle
connections, and more callers than it serves at once. The first checks run `drafters push-server` as a process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.watch import push
from registry.watch.push import PushHint, PushServer, nesting_depth

SECRET = "hub-webhook-secret"
PAYLOAD = json.dumps({"event": {"action": "update", "scope": "repo.content"},
                      "repo": {"type": "model", "name": "Qwen/Qwen3-8B", "private": False},
                      "updatedRefs": [{"ref": "refs/heads/main"}]}).encode()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def raw(port: int, head: str, body: bytes = b"", *, read_timeout: float = 10) -> str:
    """Send a request as bytes (so headers can be wrong on purpose); the status line, plus " | <body>" when the
    answer is queued or busy."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as connection:
        connection.sendall(head.encode() + b"\r\n" + body)
        answer = b""
        try:
            while chunk := connection.recv(65536):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    text = answer.decode(errors="replace")
    status, _, rest = text.partition("\r\n")
    return status + (" | " + rest.split("\r\n\r\n", 1)[-1] if rest else "")


def post(port: int, body: bytes, *, length: str | None = None, secret: str = SECRET) -> str:
    head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Webhook-Secret: {secret}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n")
    return raw(port, head, body)


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[int]:
    port = _free_port()
    env = {**os.environ, "DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_HUB_WEBHOOK_SECRET": SECRET,
           "DRAFTERS_HUB_ENDPOINT": "http://127.0.0.1:9", "DRAFTERS_HUB_TIMEOUT_S": "1"}
    process = subprocess.Popen([sys.executable, "-m", "drafters.cli", "push-server", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "listening on" in line, line + (process.stdout.read() if process.poll() is not None else "")
    try:
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_bad_lengths_and_bodies_are_refused(server_process: int) -> None:
    port = server_process
    assert post(port, PAYLOAD) == "HTTP/1.0 202 Accepted | queued"
    assert "401 Unauthorized" in post(port, PAYLOAD, secret="wrong")
    assert post(port, b"x" * 64, length="-1") == "HTTP/1.0 400 Bad Request | bad Content-Length"
    assert post(port, PAYLOAD, length="ten") == "HTTP/1.0 400 Bad Request | bad Content-Length"
    assert post(port, PAYLOAD, length="+5") == "HTTP/1.0 400 Bad Request | bad Content-Length"
    assert "413 Request Entity Too Large" in post(port, b"", length=str(300 * 2**20))
    deep = b"[" * 5000 + b"]" * 5000
    assert post(port, deep) == "HTTP/1.0 400 Bad Request | JSON nested too deeply"
    assert post(port, b'{"a": ' * 40 + b"1" + b"}" * 40) == "HTTP/1.0 400 Bad Request | JSON nested too deeply"
    # Brackets inside strings are text, not nesting.
    assert post(port, PAYLOAD[:-1] + b', "x": "' + b"[" * 500 + b'"}') == "HTTP/1.0 202 Accepted | queued"
    assert post(port, PAYLOAD) == "HTTP/1.0 202 Accepted | queued"  # and it still serves


def test_nesting_depth_counts_outside_strings() -> None:
    assert nesting_depth(b'{"a": [1, {"b": "]]]["}]}') == 3
    assert nesting_depth(b'"\\"[[["') == 0
    assert nesting_depth(b"[" * 100) == push.MAX_DEPTH + 1  # stops counting past the limit


@pytest.fixture
def blocked_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PushServer, threading.Event, list[str]]]:
    monkeypatch.setattr(push, "MAX_QUEUED", 2)
    release = threading.Event()
    seen: list[str] = []

    def slow(hint: PushHint) -> None:
        seen.append(hint.repo_id)
        release.wait(30)

    server = PushServer(SECRET, slow, max_connections=3, idle_timeout_s=1.0).start()
    try:
        yield server, release, seen
    finally:
        release.set()
        server.stop()


def test_idle_connections_are_closed_and_connections_bounded(blocked_server) -> None:  # type: ignore[no-untyped-def]
    server, _, _ = blocked_server
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(3)]
    try:
        time.sleep(0.3)
        assert post(server.port, PAYLOAD) == "HTTP/1.0 503 Service Unavailable | busy"  # idle ones hold every slot
        started = time.monotonic()
        for connection in idle:
            assert connection.recv(1) == b""  # closed by the server
        assert time.monotonic() - started < 8
    finally:
        for connection in idle:
            connection.close()
    time.sleep(0.3)
    assert post(server.port, PAYLOAD) == "HTTP/1.0 202 Accepted | queued"
    alive = sum(1 for t in threading.enumerate() if t.name.startswith("Thread-") and t.is_alive())
    assert alive < 10


def test_a_full_queue_answers_503(blocked_server) -> None:  # type: ignore[no-untyped-def]
    server, release, seen = blocked_server
    answers = [post(server.port, PAYLOAD)]
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    answers += [post(server.port, PAYLOAD) for _ in range(4)]
    # One is being read (blocked), two wait in the queue, the rest are turned away for the Hub to retry.
    assert answers == ["HTTP/1.0 202 Accepted | queued"] * 3 + ["HTTP/1.0 503 Service Unavailable | busy"] * 2
    release.set()
    deadline = time.monotonic() + 10
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == ["Qwen/Qwen3-8B"] * 3
