"""Webhook secrets, URLs and signatures: Standard Webhooks signing and checking, and what output may show.

A webhook URL or secret can be a credential (Slack, Discord and Teams put the token in the URL path), so these
helpers never echo one: errors say what is wrong in one line, and URLs are masked for output.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import re
import secrets as random_secrets
import socket
import time
from urllib.parse import urlsplit

import httpx

from registry.redact import mask_url


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` + base64 of 32 random bytes, what every receiver library reads as is."""
    return "whsec_" + base64.b64encode(random_secrets.token_bytes(32)).decode()


def check_url(url: str) -> str:
    """The URL when it can ever be posted to; otherwise ValueError with one line (the URL itself is not echoed: it
    may be a credential)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError("webhook URL must be http(s)://")
    try:
        port = urlsplit(url).port  # ValueError past 65535
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        raise ValueError("webhook URL is not a valid URL (its host or port cannot be)") from None
    if not parsed.host:
        raise ValueError("webhook URL has no host")
    if port == 0:
        raise ValueError("webhook URL has port 0")
    # raw_host is the IDNA (ASCII) form: `münchen.de` is `xn--mnchen-3ya.de` there.
    if not _HOST.fullmatch(parsed.raw_host.decode("ascii", "replace")) and not _is_ip(parsed.host):
        raise ValueError("webhook URL's host is not a host name (letters, digits, '-', '.')")
    return url


# What a host name may hold once httpx has IDNA-encoded it; a space, `%` or a control character never resolves.
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,252})")
INTERNAL_SETTING = "DRAFTERS_WEBHOOK_ALLOW_INTERNAL"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def internal_address(address: str) -> bool:
    """Loopback, private, link-local (169.254.169.254, the cloud metadata service), shared, reserved: anything
    that is not a public address."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def check_target(url: str, *, allow_internal: bool) -> str | None:
    """check_url, then where the URL leads: ValueError when its host is or resolves to an internal address and
    internal targets are not allowed (`DRAFTERS_WEBHOOK_ALLOW_INTERNAL=1`: a receiver on this machine or the LAN
    is a real use). A name that does not resolve now is accepted with the warning returned: DNS may be down or
    split-horizon, and every delivery resolves it again (and refuses an internal answer then too)."""
    check_url(url)
    parsed = httpx.URL(url)
    if allow_internal:
        return None
    host = parsed.host
    try:
        infos = socket.getaddrinfo(host, parsed.port or (443 if parsed.scheme == "https" else 80),
                                   type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        return "the webhook host does not resolve now; deliveries will retry"
    if any(internal_address(str(info[4][0])) for info in infos):
        raise ValueError(f"webhook URL leads to an internal address (loopback, private, link-local); set "
                         f"{INTERNAL_SETTING}=1 to allow internal receivers")
    return None


def check_secret(secret: str) -> str:
    """A `whsec_` secret must be base64 (what Standard Webhooks receivers decode); any other is used as raw bytes."""
    if secret.startswith("whsec_"):
        try:
            key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a whsec_ secret must be base64 after the prefix") from None
        if not key:
            raise ValueError("the whsec_ secret is empty")
    elif not secret:
        raise ValueError("the signing secret is empty")
    return secret


def mask_webhook_url(url: str) -> str:
    """A webhook URL for output: registry.redact.mask_url with the path and query treated as credentials
    (Slack, Discord and Teams put the token in the path)."""
    return mask_url(url, path_is_secret=True)


def _signing_key(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret.removeprefix("whsec_"))
    return secret.encode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks signature header value: `v1,<base64 HMAC-SHA256(id.timestamp.body)>`."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_signing_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify(secret: str, headers: dict[str, str], body: bytes, *, tolerance_s: int = 300) -> bool:
    """What a receiver checks; used by tests and by anyone embedding a receiver in Python."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        message_id, timestamp = lowered["webhook-id"], int(lowered["webhook-timestamp"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > tolerance_s:
        return False
    expected = sign(secret, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in lowered.get("webhook-signature", "").split())


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def slack_text(text: str) -> str:
    """Text Slack shows literally: control characters out, and &, <, > escaped so that `<!channel>` or
    `<https://…|click>` in a Hub config cannot ping a channel or make a link."""
    text = _CONTROL.sub(" ", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
