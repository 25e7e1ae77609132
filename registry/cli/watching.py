"""Commands of the Hub watcher and its alerts: watch, alerts, subscriptions, feed, push endpoint."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from registry import render
from registry.settings import get_settings
from registry.store import NotFound, Store
from registry.cli.common import JsonOption, UserError, app, open_store

if TYPE_CHECKING:
    from registry.secrets import SecretBox
    from registry.watch import PollReport, Watcher


def make_watcher(store: Store, *, max_requests: int | None = None, deadline_s: float | None = None) -> "Watcher":
    from registry.hub import HubClient
    from registry.watch import Watcher

    settings = get_settings()
    client = HubClient(
        settings.hub_endpoint,
        settings.token_value(),
        settings.hub_cache_dir,
        timeout=settings.hub_timeout_s,
        max_requests=max_requests,
    )
    return Watcher(store, client, list(settings.watched_orgs), deadline_s=deadline_s)


def _print_poll(report: "PollReport") -> None:
    for org in report.orgs:
        state = "busy (another watcher)" if org.skipped_lease else (f"[red]{org.error}[/]" if org.error else "ok")
        render.console.print(f"  {org.org:<14} listed {org.listed:>5}  processed {org.processed:>5}  {state}")
    render.console.print(f"poll: {len(report.events)} new events, {report.requests} Hub requests, {report.seconds:.1f}s")
    for event in report.events:
        render.console.print(f"  {event.type}: {event.payload.get('message', event.subject)}", markup=False)


@app.command("watch")
def watch(
    once: Annotated[bool, typer.Option("--once", help="Poll every watched org once and exit.")] = False,
    interval: Annotated[float | None, typer.Option(help="Seconds between polls (default DRAFTERS_WATCH_INTERVAL_S).")] = None,
    max_requests: Annotated[int | None, typer.Option(help="Request budget of one poll.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Watch the Hub for new checkpoints, upgrades, in-place weight changes and drafter releases."""
    import threading

    store = open_store()
    watcher = make_watcher(store, max_requests=max_requests)
    if once:
        report = watcher.poll_once()
        if as_json:
            render.print_json({"orgs": report.orgs, "events": report.events, "requests": report.requests})
        else:
            _print_poll(report)
        if report.errors and all(o.error for o in report.orgs):
            raise typer.Exit(1)
        return
    stop = threading.Event()
    try:
        watcher.run_forever(interval or get_settings().watch_interval_s, stop, _print_poll)
    except KeyboardInterrupt:
        stop.set()


def _parse_since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UserError(f"--since takes an ISO date or datetime, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@app.command("alerts")
def alerts_command(
    type_: Annotated[list[str] | None, typer.Option("--type", help="Event type (repeatable).")] = None,
    org: Annotated[str | None, typer.Option(help="Only this org.")] = None,
    family: Annotated[str | None, typer.Option(help="Only this family.")] = None,
    since: Annotated[str | None, typer.Option(help="Only events recorded since this ISO date.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Events the watcher recorded."""
    events = open_store().events(types=type_, org=org, family=family, since=_parse_since(since))
    if as_json:
        render.print_json(events)
        return
    render.table(
        "alerts",
        ["when", "type", "subject", "message"],
        [(e.created_at.strftime("%Y-%m-%d %H:%M"), e.type, e.subject, e.payload.get("message", "")) for e in events],
    )


def _secret_box() -> "SecretBox":
    from registry.secrets import SecretBox

    return SecretBox(get_settings().home_dir / "secrets.json")


@app.command("subscribe")
def subscribe_command(
    url: str,
    events: Annotated[str | None, typer.Option(help="Comma-separated event types (default: all).")] = None,
    org: Annotated[str | None, typer.Option()] = None,
    family: Annotated[str | None, typer.Option()] = None,
    repo: Annotated[str | None, typer.Option()] = None,
    secret_env: Annotated[
        str | None, typer.Option(help="Name of an environment variable holding the signing secret.")
    ] = None,
) -> None:
    """Deliver matching events to a webhook (Slack-compatible JSON, Standard Webhooks signature)."""
    import os

    from registry import alerts

    secret = None
    if secret_env is not None:
        secret = os.environ.get(secret_env)
        if not secret:
            raise UserError(f"environment variable {secret_env} is empty or unset")
    types = tuple(t.strip() for t in events.split(",") if t.strip()) if events else ()
    try:
        record = alerts.subscribe(open_store(), _secret_box(), url, event_types=types, org=org, family=family,
                                  repo=repo, secret=secret)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    render.console.print(f"subscription {record.uid} -> {record.url} ({', '.join(record.event_types) or 'all events'})"
                         f"{' signed' if record.has_secret else ''}")


@app.command("subscriptions")
def subscriptions_command(as_json: JsonOption = False) -> None:
    """Webhook subscriptions."""
    from registry import alerts

    records = alerts.subscriptions(open_store())
    if as_json:
        render.print_json(records)
        return
    render.table("subscriptions", ["id", "url", "events", "org", "family", "repo", "signed", "active"],
                 [(r.uid, r.url, ",".join(r.event_types) or "all", r.org, r.family, r.repo, r.has_secret, r.active)
                  for r in records])


@app.command("unsubscribe")
def unsubscribe_command(uid: str) -> None:
    from registry import alerts

    if not alerts.unsubscribe(open_store(), _secret_box(), uid):
        raise NotFound(f"no subscription {uid}")


@app.command("deliver")
def deliver_command() -> None:
    """Send pending webhook deliveries now (the long-running service does this on its own)."""
    from registry import alerts

    report = alerts.deliver_pending(open_store(), _secret_box())
    render.console.print(f"deliveries: {report.delivered} delivered, {report.pending} pending, {report.failed} given up")


@app.command("feed")
def feed_command(out: Annotated[Path | None, typer.Option(help="Where to write the Atom feed.")] = None) -> None:
    """Write the Atom feed of events (default: $DRAFTERS_HOME/feed.atom)."""
    from registry.feed import write_feed

    path = write_feed(open_store().events(), out or get_settings().home_dir / "feed.atom")
    render.console.print(f"feed written to {path}")


@app.command("push-server")
def push_server(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (put a TLS proxy in front for the Hub).")] = 8787,
    secret_env: Annotated[str, typer.Option(help="Env var with the Hub webhook's shared secret.")] = "DRAFTERS_HUB_WEBHOOK_SECRET",
) -> None:
    """Accept Hub webhook calls and read the named repo right away."""
    import os
    import threading

    from registry.push import PushServer

    secret = os.environ.get(secret_env)
    if not secret:
        raise UserError(f"set {secret_env} to the Hub webhook's secret first")
    watcher = make_watcher(open_store())
    server = PushServer(secret, watcher.poll_repo, port=port).start()
    render.console.print(f"listening on http://127.0.0.1:{server.port}/")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
