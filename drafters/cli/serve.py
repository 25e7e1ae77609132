"""`drafters serve` (the read-only JSON API, with the Hub webhook endpoint when a secret is set) and
`drafters push-server` (the same app, for the webhook alone): uvicorn servers, limits from their settings;
`serve` runs one per core by default (drafters/api/workers.py)."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from drafters.api.app import ApiConfig, create_app
from drafters.api.server import bind, make_server
from drafters.api.workers import default_workers, serve_forked
from drafters.cli import render
from drafters.cli.common import UserError, app, open_store
from drafters.cli.watching import make_watcher
from registry.settings import get_settings
from registry.watch.push import PushQueue

SECRET_ENV = "DRAFTERS_HUB_WEBHOOK_SECRET"


def push_queue(secret: str) -> PushQueue:
    """Hints from the Hub, read by a watcher on the registry database (which it creates when missing)."""
    watcher = make_watcher(open_store())
    return PushQueue(secret, lambda hint: watcher.poll_repo(hint.repo_id, hint.head_sha, moved_from=hint.moved_from,
                                                            made_public=hint.made_public))


def api_config(push: PushQueue | None) -> ApiConfig:
    settings = get_settings()
    token = settings.api_token.get_secret_value() if settings.api_token is not None else None
    return ApiConfig(settings.resolved_database_url, token=token or None, cors_origins=list(settings.api_cors_origins),
                     push=push)


def _serve_one(make_config: Callable[[], ApiConfig], sock: socket.socket) -> None:
    """One uvicorn server on `sock` until SIGINT / SIGTERM; its app (and webhook queue) built here, in the
    process that serves it."""
    config = make_config()
    if config.push is not None:
        config.push.start()
    try:
        make_server(create_app(config)).run(sockets=[sock])
    finally:
        if config.push is not None:
            config.push.stop()


def _run(make_config: Callable[[], ApiConfig], host: str, port: int, what: str, workers: int = 1) -> None:
    try:
        sock = bind(host, port)
    except OSError as exc:
        hint = " (another process holds it: choose another with --port)" if exc.errno == errno.EADDRINUSE else ""
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
    if workers > 1:
        render.console.print(f"{what}: {workers} worker processes", markup=False, highlight=False)
    render.console.print(f"{what} listening on http://{host}:{sock.getsockname()[1]}/", markup=False,
                         highlight=False, soft_wrap=True)
    if workers > 1:
        serve_forked(lambda: _serve_one(make_config, sock), sock, workers)
        return
    try:
        _serve_one(make_config, sock)
    finally:
        sock.close()


def loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def check_exposure(host: str, token: str | None, *, allow_open: bool) -> None:
    """An API on an address other machines reach, with no token (unset or `DRAFTERS_API_TOKEN=""`), is refused
    unless `--allow-open` says that is meant; an empty token is said even on loopback, as it reads like a token
    and protects nothing."""
    empty = token is not None and not token
    if not token and not loopback(host) and not allow_open:
        raise UserError(f"refusing to serve on {host} without a token: anyone who reaches it can read the API; set "
                        "DRAFTERS_API_TOKEN" + (" (it is set but empty)" if empty else "") + ", listen on 127.0.0.1, "
                        "or pass --allow-open")
    if not token and not loopback(host):
        print(f"warning: the API on {host} is open to anyone who reaches it (--allow-open, no DRAFTERS_API_TOKEN)",
              file=sys.stderr, flush=True)
    elif empty:
        print("warning: DRAFTERS_API_TOKEN is set but empty: no token is checked", file=sys.stderr, flush=True)


@app.command("serve")
def serve_command(
    port: Annotated[int | None, typer.Option(help="Port (default DRAFTERS_API_PORT, 8788).")] = None,
    host: Annotated[str | None, typer.Option(help="Address (default DRAFTERS_API_HOST, 127.0.0.1).")] = None,
    workers: Annotated[int | None, typer.Option(
        min=1, help="Server processes sharing the port (default: one per CPU core, at most 8).")] = None,
    allow_open: Annotated[bool, typer.Option(
        "--allow-open", help="Serve on a non-loopback address without DRAFTERS_API_TOKEN (refused otherwise).")] = False,
) -> None:
    """The registry as a read-only HTTP JSON API (OpenAPI at /openapi.json); with DRAFTERS_HUB_WEBHOOK_SECRET set,
    also the Hub webhook endpoint (POST /)."""
    settings = get_settings()
    token = settings.api_token.get_secret_value() if settings.api_token is not None else None
    check_exposure(host or settings.api_host, token, allow_open=allow_open)
    secret = os.environ.get(SECRET_ENV)
    # Creates or upgrades the database once, so that the read-only side finds it at head; no connection stays
    # open across the workers' fork.
    open_store().engine.dispose()
    _run(lambda: api_config(push_queue(secret) if secret else None), host or settings.api_host,
         settings.api_port if port is None else port, "API", default_workers() if workers is None else workers)


@app.command("push-server")
def push_server(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (put a TLS proxy in front for the Hub).")] = 8787,
    secret_env: Annotated[str, typer.Option(help="Env var with the Hub webhook's shared secret.")] = SECRET_ENV,
) -> None:
    """Accept Hub webhook calls and read the named repo right away (the API app; its read routes too)."""
    secret = os.environ.get(secret_env)
    if not secret:
        raise UserError(f"set {secret_env} to the Hub webhook's secret first")
    _run(lambda: api_config(push_queue(secret)), "127.0.0.1", port, "push endpoint")
