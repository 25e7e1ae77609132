"""`drafters serve` (the read-only JSON API, with the Hub webhook endpoint when a secret is set) and
`drafters push-server` (the same app, for the webhook alone): one uvicorn server, limits from its settings."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from drafters.api.app import ApiConfig, create_app
from drafters.api.server import bind, make_server
from drafters.cli import render
from drafters.cli.common import UserError, app, open_store
from drafters.cli.watching import make_watcher
from registry.settings import get_settings
from registry.watch.push import PushQueue

SECRET_ENV = "DRAFTERS_HUB_WEBHOOK_SECRET"


def push_queue(secret: str) -> PushQueue:
    """Hints from the Hub, read by a watcher on the registry database (which it creates when missing)."""
    watcher = make_watcher(open_store())
    return PushQueue(secret, lambda hint: watcher.poll_repo(hint.repo_id, hint.head_sha, moved_from=hint.moved_from))


def api_config(push: PushQueue | None) -> ApiConfig:
    settings = get_settings()
    token = settings.api_token.get_secret_value() if settings.api_token is not None else None
    return ApiConfig(settings.resolved_database_url, token=token or None, cors_origins=list(settings.api_cors_origins),
                     push=push)


def _run(config: ApiConfig, host: str, port: int, what: str) -> None:
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    if config.push is not None:
        config.push.start()
    server = make_server(create_app(config))
    render.console.print(f"{what} listening on http://{host}:{sock.getsockname()[1]}/", markup=False,
                         highlight=False, soft_wrap=True)
    try:
        server.run(sockets=[sock])  # stops on SIGINT / SIGTERM
    finally:
        sock.close()
        if config.push is not None:
            config.push.stop()


@app.command("serve")
def serve_command(
    port: Annotated[int | None, typer.Option(help="Port (default DRAFTERS_API_PORT, 8788).")] = None,
    host: Annotated[str | None, typer.Option(help="Address (default DRAFTERS_API_HOST, 127.0.0.1).")] = None,
) -> None:
    """The registry as a read-only HTTP JSON API (OpenAPI at /openapi.json); with DRAFTERS_HUB_WEBHOOK_SECRET set,
    also the Hub webhook endpoint (POST /)."""
    settings = get_settings()
    secret = os.environ.get(SECRET_ENV)
    open_store()  # creates or upgrades the database once, so that the read-only side finds it at head
    config = api_config(push_queue(secret) if secret else None)
    _run(config, host or settings.api_host, settings.api_port if port is None else port, "API")


@app.command("push-server")
def push_server(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (put a TLS proxy in front for the Hub).")] = 8787,
    secret_env: Annotated[str, typer.Option(help="Env var with the Hub webhook's shared secret.")] = SECRET_ENV,
) -> None:
    """Accept Hub webhook calls and read the named repo right away (the API app; its read routes too)."""
    secret = os.environ.get(secret_env)
    if not secret:
        raise UserError(f"set {secret_env} to the Hub webhook's secret first")
    _run(api_config(push_queue(secret)), "127.0.0.1", port, "push endpoint")
