"""The HTTP layer under huggingface_hub: one client factory, installed once per process, whose transport hands
each request made inside a HubClient call to that client's policy (budget, retries, rate limits) and passes every
other request through; plus the proxy transports and the 429 wait."""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Protocol

import huggingface_hub
from huggingface_hub.utils import httpx, parse_ratelimit_headers

from registry.hub.types import BadResponse


class PolicyClient(Protocol):
    """The client a request is made for (HubClient): it sends the request under its policy."""

    def _send_with_policy(self, inner: httpx.BaseTransport, request: httpx.Request) -> httpx.Response: ...


ACTIVE_CLIENT: ContextVar[PolicyClient | None] = ContextVar("registry_hub_active_client", default=None)
_INSTALL_LOCK = threading.Lock()
_installed = False


class GuardedStream(httpx.SyncByteStream):
    """A response body whose early end becomes BadResponse instead of an httpx error huggingface_hub retries, and
    that is never read past `limit` bytes (a file's advertised size): an endless body is refused at once."""

    def __init__(self, inner: httpx.SyncByteStream, what: str, limit: int | None = None) -> None:
        self._inner = inner
        self._what = what
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        read = 0
        try:
            for chunk in self._inner:
                read += len(chunk)
                if self._limit is not None and read > self._limit:
                    raise BadResponse(f"{self._what}: body longer than the {self._limit} bytes the Hub advertises "
                                      "for the file; refused")
                yield chunk
        except httpx.TransportError as exc:
            raise BadResponse(f"{self._what}: response body cut short ({type(exc).__name__})") from exc

    def close(self) -> None:
        self._inner.close()


class PoliteTransport(httpx.BaseTransport):
    """Hands requests made inside a HubClient call to that client's policy; passes everything else through."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        client = ACTIVE_CLIENT.get()
        if client is None:
            return self._inner.handle_request(request)
        return client._send_with_policy(self._inner, request)

    def close(self) -> None:
        self._inner.close()


def install_http_client_factory() -> None:
    """Route huggingface_hub's shared HTTP client through `PoliteTransport`, keeping its request hooks."""
    global _installed
    with _INSTALL_LOCK:
        if _installed:
            return
        request_hooks = list(huggingface_hub.get_session().event_hooks["request"])

        def factory() -> httpx.Client:
            return httpx.Client(
                event_hooks={"request": request_hooks},
                follow_redirects=True,
                timeout=None,
                transport=PoliteTransport(httpx.HTTPTransport()),
                mounts=proxy_mounts(),
            )

        huggingface_hub.set_client_factory(factory)
        _installed = True


def proxy_mounts() -> dict[str, httpx.BaseTransport | None]:
    """Transports for the environment's proxy settings (read when the shared client is built), the way httpx's
    `trust_env` maps them: a proxy per scheme, and NO_PROXY hosts going direct. Each carries the policy."""
    proxies = urllib.request.getproxies_environment()
    mounts: dict[str, httpx.BaseTransport | None] = {}
    for scheme in ("http", "https"):
        url = proxies.get(scheme) or proxies.get("all")
        if url:
            if "://" not in url:
                url = f"http://{url}"
            mounts[f"{scheme}://"] = PoliteTransport(httpx.HTTPTransport(proxy=url))
    if mounts:
        for host in (proxies.get("no") or "").split(","):
            host = host.strip()
            if not host:
                continue
            if host == "*":
                return {}
            if "://" in host:
                pattern = host
            elif host == "localhost" or re.fullmatch(r"[\d.]+", host):
                pattern = f"all://{host}"
            elif ":" in host and not host.startswith("["):
                pattern = f"all://[{host}]"  # an IPv6 address
            else:
                pattern = f"all://*{host.lstrip('.')}"  # the domain and its subdomains
            mounts[pattern] = PoliteTransport(httpx.HTTPTransport())
    return mounts


def wait_from_headers(headers: httpx.Headers) -> float | None:
    """Seconds a 429 asks us to wait: the RateLimit reset when exhausted, or Retry-After, whichever is longer."""
    waits: list[float] = []
    info = parse_ratelimit_headers(headers)
    if info is not None and info.remaining == 0:
        waits.append(float(info.reset_in_seconds))
    retry_after = headers.get("retry-after", "").strip()
    try:
        waits.append(max(0.0, float(retry_after)))
    except ValueError:
        pass  # an HTTP-date or garbage: fall back to our own backoff
    return max(waits) if waits else None
