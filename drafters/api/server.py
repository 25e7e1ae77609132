"""Serving the API app with uvicorn: the limits come from the server's own settings.

- `limit_concurrency`: past MAX_CONNECTIONS open connections uvicorn answers 503 itself. Idle and trickling
  connections are coroutines on one event loop, not threads, so the bound is high: forty slow callers leave
  everyone else served (the old thread-per-connection server answered 503 to all at 32).
- `timeout_keep_alive`: an idle keep-alive connection is closed after IDLE_TIMEOUT_S. uvicorn starts that timer
  only after a first answer, so `_Protocol` also starts it when a connection opens: one that never completes its
  request headers is closed after the same time.
- `h11_max_incomplete_event_size`: request headers over 64 KiB are refused (400) by the parser.
- malformed requests (a Content-Length that is not a number) are refused by h11 with 400 before the app runs.

Uvicorn's own logging is kept out of the terminal (no access log; client hang-ups and bad requests print
nothing); a secret in a header or a token is never logged.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from drafters.api.app import ApiConfig, create_app
from registry.watch.push import PushQueue

IDLE_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 1000
MAX_HEADER_BYTES = 64 * 1024


class _Protocol(H11Protocol):
    """h11 with one more timer: a connection that has not finished its first request's headers within
    timeout_keep_alive is closed (uvicorn's own timer covers the time between requests)."""

    _opening_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._opening_timer = self.loop.call_later(self.timeout_keep_alive, self._close_if_no_request)

    def _close_if_no_request(self) -> None:
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._opening_timer is not None:
            self._opening_timer.cancel()
        super().connection_lost(exc)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the server starts so that port 0 names its real port at once."""
    # IPPROTO_TCP named explicitly: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets whose
    # proto says TCP, and accepted sockets inherit the listener's. With proto 0 every answer written in two parts
    # (headers, then body) waited for the client's delayed ACK: 40 ms per request on loopback.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def make_server(app: Any, *, max_connections: int = MAX_CONNECTIONS, idle_timeout_s: float = IDLE_TIMEOUT_S
                ) -> uvicorn.Server:
    config = uvicorn.Config(
        app, http=_Protocol, lifespan="off", log_config=None, access_log=False, server_header=False,
        limit_concurrency=max_connections, timeout_keep_alive=idle_timeout_s,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES, backlog=2048,
    )
    return uvicorn.Server(config)


class ApiServer:
    """The app on a port of 127.0.0.1 in a thread of its own (tests, `drafters up`): `start()`, `stop()`."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *,
                 max_connections: int = MAX_CONNECTIONS, idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.app = app
        self.socket = bind(host, port)
        self.host = host
        self.port = int(self.socket.getsockname()[1])
        self.server = make_server(app, max_connections=max_connections, idle_timeout_s=idle_timeout_s)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, name="api",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> ApiServer:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=15)
        self.socket.close()
        push = getattr(getattr(self.app, "state", None), "push", None)
        if push is not None:
            push.stop()

    @property
    def repos(self) -> Any:
        """The push endpoint's queue of hints (tests join it to wait for the watcher)."""
        return self.app.state.push.repos


def push_endpoint(secret: str, on_repo: Any, *, port: int = 0, max_connections: int = MAX_CONNECTIONS,
                  idle_timeout_s: float = IDLE_TIMEOUT_S) -> ApiServer:
    """The API app with the Hub webhook endpoint on, no database: what `drafters push-server` serves."""
    queue = PushQueue(secret, on_repo).start()
    return ApiServer(create_app(ApiConfig(None, push=queue)), port=port, max_connections=max_connections,
                     idle_timeout_s=idle_timeout_s)
