"""Where a webhook delivery may connect: the host is resolved at connect time, every address it resolves to is
checked, and the connection goes to a checked address. A name that resolved to a public address when it was
subscribed (or at the pre-check just before posting) and to 127.0.0.1 or 169.254.169.254 now (DNS rebinding)
is refused here, because this resolution is the one the socket uses.

Through a proxy from the environment the proxy resolves the name, so the pre-check is all that applies there.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterable

import httpcore
import httpx

from registry.alerts.signing import INTERNAL_SETTING, internal_address


class PublicOnlyBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, connecting only to addresses that are not internal."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError, OSError) as exc:
            raise httpcore.ConnectError(f"the webhook host does not resolve: {exc.__class__.__name__}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if any(internal_address(address) for address in addresses):
            raise httpcore.ConnectError(f"refused at connect: the webhook host resolves to an internal address now; "
                                        f"set {INTERNAL_SETTING}=1 to allow internal receivers")
        last: httpcore.ConnectError | None = None
        for address in addresses:  # the checked addresses themselves: no second resolution
            try:
                return self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = httpcore.ConnectError(str(exc))
        raise last or httpcore.ConnectError("the webhook host has no address")

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("webhooks are delivered over TCP only")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class PublicOnlyTransport(httpx.HTTPTransport):
    """httpx's transport over PublicOnlyBackend. TLS still checks the certificate against the host name: httpcore
    passes the URL's host as the server name whatever address the socket went to."""

    def __init__(self) -> None:
        super().__init__()
        # httpx builds its pool without a backend argument; this pool is the same with the checking backend.
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(),
                                             network_backend=PublicOnlyBackend())


def delivery_client(*, allow_internal: bool) -> httpx.Client:
    """The client deliveries post with: any address when internal receivers are allowed or a proxy from the
    environment carries the request, else only public addresses, checked when the socket connects."""
    proxies = urllib.request.getproxies_environment()
    if allow_internal or any(proxies.get(scheme) for scheme in ("http", "https", "all")):
        return httpx.Client(timeout=10.0)
    return httpx.Client(timeout=10.0, transport=PublicOnlyTransport())
