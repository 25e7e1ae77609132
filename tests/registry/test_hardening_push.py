"""The push endpoint under bad input: lengths that are not lengths, bodies too big or too deep, idle
connections, more callers than it serves at once, slow-trickling callers, callers that hang up, and chunked
bodies. The checks that need a process run `drafters push-server` (the API app on uvicorn)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from registry.watch import push
from drafters.api.server import ApiServer, push_endpoint
from registry.watch.push import PushHint, nesting_depth
from tests.support.cli import start, stop

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
    head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Webhook-Secret: {secret}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n")
    return raw(port, head, body)


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[int]:
    for port, _ in _push_server(tmp_path):
        yield port


def _push_server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    port = _free_port()
    env = {"DRAFTERS_HOME": str(tmp_path / "home"), "DRAFTERS_HUB_WEBHOOK_SECRET": SECRET,
           "DRAFTERS_HUB_ENDPOINT": "http://127.0.0.1:9", "DRAFTERS_HUB_TIMEOUT_S": "1"}
    server = start(["push-server", "--port", str(port)], until=None, env=env)
    process, line = server.process, "".join(server.lines)
    assert process.stdout is not None
    assert "listening on" in line, line + (process.stdout.read() if process.poll() is not None else "")
    try:
        yield port, process
    finally:
        if process.poll() is None:
            stop(process, timeout=30)


def test_bad_lengths_and_bodies_are_refused(server_process: int) -> None:
    port = server_process
    assert post(port, PAYLOAD) == "HTTP/1.1 202 Accepted | queued"
    assert "401 Unauthorized" in post(port, PAYLOAD, secret="wrong")
    # Lengths that are not lengths never reach the app: the server's HTTP parser refuses them.
    for length in ("-1", "ten", "+5"):
        assert post(port, b"x" * 64, length=length).startswith("HTTP/1.1 400 Bad Request"), length
    assert post(port, b"", length=str(300 * 2**20)).startswith("HTTP/1.1 413 ")
    deep = b"[" * 5000 + b"]" * 5000
    assert post(port, deep) == "HTTP/1.1 400 Bad Request | JSON nested too deeply"
    assert post(port, b'{"a": ' * 40 + b"1" + b"}" * 40) == "HTTP/1.1 400 Bad Request | JSON nested too deeply"
    # Brackets inside strings are text, not nesting.
    assert post(port, PAYLOAD[:-1] + b', "x": "' + b"[" * 500 + b'"}') == "HTTP/1.1 202 Accepted | queued"
    assert post(port, PAYLOAD) == "HTTP/1.1 202 Accepted | queued"  # and it still serves


def test_nesting_depth_counts_outside_strings() -> None:
    assert nesting_depth(b'{"a": [1, {"b": "]]]["}]}') == 3
    assert nesting_depth(b'"\\"[[["') == 0
    assert nesting_depth(b"[" * 100) == push.MAX_DEPTH + 1  # stops counting past the limit


@pytest.fixture
def blocked_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ApiServer, threading.Event, list[str]]]:
    monkeypatch.setattr(push, "MAX_QUEUED", 2)
    release = threading.Event()
    seen: list[str] = []

    def slow(hint: PushHint) -> None:
        seen.append(hint.repo_id)
        release.wait(30)

    server = push_endpoint(SECRET, slow, max_connections=3, idle_timeout_s=1.0).start()
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
        # Idle ones hold every slot the server was given (3 here): uvicorn itself answers 503.
        assert post(server.port, PAYLOAD) == "HTTP/1.1 503 Service Unavailable | Service Unavailable"
        started = time.monotonic()
        for connection in idle:
            assert connection.recv(1) == b""  # closed by the server
        assert time.monotonic() - started < 8
    finally:
        for connection in idle:
            connection.close()
    time.sleep(0.3)
    assert post(server.port, PAYLOAD) == "HTTP/1.1 202 Accepted | queued"


def test_a_full_queue_answers_503(blocked_server) -> None:  # type: ignore[no-untyped-def]
    server, release, seen = blocked_server
    answers = [post(server.port, PAYLOAD)]
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    answers += [post(server.port, PAYLOAD) for _ in range(4)]
    # One is being read (blocked), two wait in the queue, the rest are turned away for the Hub to retry.
    assert answers == ["HTTP/1.1 202 Accepted | queued"] * 3 + ["HTTP/1.1 503 Service Unavailable | busy"] * 2
    release.set()
    deadline = time.monotonic() + 10
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == ["Qwen/Qwen3-8B"] * 3


# ---- issue 24 item 5: trickling callers, hang-ups, chunked bodies --------------------------------------------


def _trickle(port: int, stop: threading.Event, *, body: bool) -> None:
    """A caller that sends its request a byte at a time, slowly, until told to stop."""
    head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Webhook-Secret: {SECRET}\r\n"
            f"Content-Length: {len(PAYLOAD)}\r\n\r\n").encode()
    data = head + PAYLOAD if body else head
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
            if body:
                connection.sendall(head)  # headers complete, then the body trickles
                data = PAYLOAD
            for byte in data:
                if stop.wait(0.25):
                    return
                connection.sendall(bytes([byte]))
    except OSError:
        pass  # closed by the server: what a slow caller may expect


def test_forty_trickling_callers_do_not_turn_everyone_away() -> None:
    # The server's default limits (what `drafters push-server` and `drafters serve` run with).
    server = push_endpoint(SECRET, lambda hint: None).start()
    stop = threading.Event()
    callers = [threading.Thread(target=_trickle, args=(server.port, stop), kwargs={"body": n % 4 != 0}, daemon=True)
               for n in range(40)]
    try:
        for caller in callers:
            caller.start()
        time.sleep(1.0)  # every trickler connected and mid-request (30 mid-body, 10 mid-headers)
        answers = [post(server.port, PAYLOAD) for _ in range(5)]
    finally:
        stop.set()
        for caller in callers:
            caller.join(timeout=10)
        server.stop()
    assert answers == ["HTTP/1.1 202 Accepted | queued"] * 5


def test_callers_that_hang_up_print_no_traceback(tmp_path: Path) -> None:
    for port, process in _push_server(tmp_path):
        head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Webhook-Secret: {SECRET}\r\n"
                f"Content-Length: {len(PAYLOAD)}\r\n\r\n").encode()
        for cut in (5, len(head) - 3, len(head) + 10):  # mid-headers, just before the body, mid-body
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
                    connection.sendall((head + PAYLOAD)[:cut])
                    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        # and one that hangs up while its answer is on the way
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(head + PAYLOAD)
        time.sleep(0.5)
        assert post(port, PAYLOAD) == "HTTP/1.1 202 Accepted | queued"
        process.terminate()
        output, _ = process.communicate(timeout=30)
        assert "Traceback" not in output and "Exception" not in output, output


def test_a_chunked_body_is_read_before_the_answer(blocked_server) -> None:  # type: ignore[no-untyped-def]
    server, release, seen = blocked_server
    release.set()
    head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Webhook-Secret: {SECRET}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    half = len(PAYLOAD) // 2
    chunks = [PAYLOAD[:half], PAYLOAD[half:]]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        connection.sendall(head + f"{len(chunks[0]):x}\r\n".encode() + chunks[0] + b"\r\n")
        connection.settimeout(0.7)
        with pytest.raises(TimeoutError):
            connection.recv(1)  # no answer while the body is still coming
        connection.settimeout(10)
        connection.sendall(f"{len(chunks[1]):x}\r\n".encode() + chunks[1] + b"\r\n0\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 202 Accepted") and answer.endswith(b"queued")
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen == ["Qwen/Qwen3-8B"]  # the hint came from the body's content
    # A chunked body that is not JSON is read, and refused for what it holds.
    bad = head + b"5\r\nnot j\r\n0\r\n\r\n"
    assert raw(server.port, bad.decode().split("\r\n\r\n", 1)[0] + "\r\n", b"5\r\nnot j\r\n0\r\n\r\n") == (
        "HTTP/1.1 400 Bad Request | not JSON")


def test_a_body_that_never_finishes_is_answered_408(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push, "BODY_TIMEOUT_S", 0.5)
    server = push_endpoint(SECRET, lambda hint: None).start()
    try:
        head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Webhook-Secret: {SECRET}\r\n"
                f"Content-Length: {len(PAYLOAD)}\r\n")
        assert raw(server.port, head, PAYLOAD[:10]) == "HTTP/1.1 408 Request Timeout | body too slow"
    finally:
        server.stop()
