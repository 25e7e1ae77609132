"""An endpoint for Hub webhooks: a call names a repo that changed, and the watcher reads that repo now.

The Hub sends the shared secret in `X-Webhook-Secret`; a call without the right one is refused. The webhook is
a hint only: the periodic poll stays the source of truth.
"""

from __future__ import annotations

import hmac
import json
import logging
import queue
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger(__name__)
MAX_BODY = 1_000_000


def repo_from_payload(payload: object) -> str | None:
    """The model repo a Hub webhook payload (version 3) is about, or None for anything else."""
    if not isinstance(payload, dict):
        return None
    repo = payload.get("repo")
    if not isinstance(repo, dict) or repo.get("type") != "model":
        return None
    moved = payload.get("movedTo")
    if isinstance(moved, dict) and isinstance(moved.get("name"), str):
        return moved["name"]
    name = repo.get("name")
    return name if isinstance(name, str) and name.count("/") == 1 else None


class PushServer:
    """Accepts Hub webhook calls on loopback (or behind a proxy) and hands repo ids to `on_repo` in order."""

    def __init__(self, secret: str, on_repo: Callable[[str], None], host: str = "127.0.0.1", port: int = 0) -> None:
        self.secret = secret
        self.on_repo = on_repo
        self.repos: queue.Queue[str | None] = queue.Queue()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: object) -> None:  # keep secrets and noise out of stderr
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                given = self.headers.get("X-Webhook-Secret", "")
                if not hmac.compare_digest(given.encode(), server.secret.encode()):
                    self._answer(401, "bad secret")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._answer(413, "too large")
                    return
                try:
                    payload = json.loads(self.rfile.read(length) or b"null")
                except json.JSONDecodeError:
                    self._answer(400, "not JSON")
                    return
                repo = repo_from_payload(payload)
                if repo is None:
                    self._answer(202, "ignored")
                    return
                server.repos.put(repo)
                self._answer(202, "queued")

            def _answer(self, status: int, text: str) -> None:
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.port = self.httpd.server_address[1]
        self._threads = [
            threading.Thread(target=self.httpd.serve_forever, daemon=True),
            threading.Thread(target=self._drain, daemon=True),
        ]

    def _drain(self) -> None:
        while (repo := self.repos.get()) is not None:
            try:
                self.on_repo(repo)
            except Exception as exc:  # noqa: BLE001 - one bad repo must not stop the endpoint
                log.warning("push poll of %s failed: %s", repo, exc)
            finally:
                self.repos.task_done()

    def start(self) -> PushServer:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.repos.put(None)
        self.httpd.shutdown()
        self.httpd.server_close()
