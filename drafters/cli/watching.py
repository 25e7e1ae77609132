"""Commands of the Hub watcher and its alerts: watch, alerts, subscriptions, feed, push endpoint."""

from __future__ import annotations

import dataclasses
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from huggingface_hub import HfApi

from drafters.cli import render
from drafters.cli.common import Failed, JsonOption, UserError, app, open_store
from registry.alerts import webhooks as alerts
from registry.alerts.feed import write_feed
from registry.alerts.secrets import SecretBox
from registry.domain.watch_list import watched_orgs
from registry.errors import Partial
from registry.hub import HubClient, HubError
from registry.redact import mask_url
from registry.settings import get_settings
from registry.store import NotFound, Store
from registry.watch.poll_report import NOT_POLLED
from registry.watch.poller import DRAFTER_QUERIES, PollReport, Watcher


def make_watcher(store: Store, *, max_requests: int | None = None, deadline_s: float | None = None) -> Watcher:
    settings = get_settings()
    client = HubClient(
        settings.hub_endpoint,
        settings.token_value(),
        settings.hub_cache_dir,
        timeout=settings.hub_timeout_s,
        max_requests=max_requests,
    )
    return Watcher(store, client, watched_orgs(settings.watched_orgs), deadline_s=deadline_s,
                   drafter_queries=DRAFTER_QUERIES)


def _failed_repos(report: PollReport) -> list[str]:
    # A drafter found under two tag queries fails under both: one repo, named once.
    return list(dict.fromkeys(repo for org in report.orgs for repo in org.failed))


def _print_poll(report: PollReport) -> None:
    # The orgs that failed alike are one line: offline, every watched org fails with the same error.
    failing: dict[str, list[str]] = {}
    for org in report.orgs:
        if org.error and not org.skipped_lease:
            failing.setdefault(org.error.removeprefix(NOT_POLLED), []).append(org.org)
            continue
        state = "busy (another watcher)" if org.skipped_lease else "ok"
        render.console.print(f"  {render.plain(org.org):<14} listed {org.listed:>5}  processed {org.processed:>5}  {state}")
    for error, orgs in failing.items():
        named = orgs[0] if len(orgs) == 1 else (f"{len(orgs)} orgs ({', '.join(orgs[:3])}"
                                                 + (f" and {len(orgs) - 3} more)" if len(orgs) > 3 else ")"))
        render.console.print(render.styled("  {} not read: [red]{}[/]", named, error))
    render.console.print(f"poll: {len(report.events)} new events, {report.requests} Hub requests, {report.seconds:.1f}s")
    failed = _failed_repos(report)
    if failed:
        render.console.print(render.strip_control(f"  {len(failed)} repo(s) failed and are retried later: {', '.join(failed[:10])}"),
                             markup=False, highlight=False)
    if report.stopped:
        render.console.print(render.strip_control(f"  stopped: {report.stopped}"), markup=False, highlight=False)
    for event in report.events:
        render.console.print(render.strip_control(f"  {event.type}: {event.payload.get('message', event.subject)}"),
                             markup=False, highlight=False)


def _incomplete(report: PollReport) -> list[str]:
    """What one poll could not read, in words; empty when it read everything it set out to (a budget cut is the
    user's own choice, not a failure)."""
    parts = []
    failed = _failed_repos(report)
    if failed:
        parts.append(f"{len(failed)} repo(s) failed")
    unreadable = [org.org for org in report.orgs if org.error]
    if unreadable:
        parts.append(f"{len(unreadable)} org(s) unreadable: {', '.join(unreadable[:5])}")
    if report.stopped:
        parts.append(f"stopped: {report.stopped}")
    return [render.plain(part) for part in parts]


@app.command("watch")
def watch(
    once: Annotated[bool, typer.Option("--once", help=(
        "Poll every watched org once and exit: 0 all read, 3 some repos or orgs failed (what was read is recorded, "
        "the rest retried by the next poll), 1 none read."))] = False,
    interval: Annotated[float | None, typer.Option(help="Seconds between polls (default DRAFTERS_WATCH_INTERVAL_S).")] = None,
    max_requests: Annotated[int | None, typer.Option(help="Request budget of one poll.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Watch the Hub for new checkpoints, upgrades, in-place weight changes and drafter releases."""
    store = open_store()
    watcher = make_watcher(store, max_requests=max_requests)
    if once:
        report = watcher.poll_once()
        if as_json:
            render.print_json({"orgs": report.orgs, "events": report.events, "requests": report.requests})
        else:
            _print_poll(report)
        if report.config_error is not None:
            raise Failed(report.config_error)
        if report.errors and all(o.error for o in report.orgs):
            raise Failed(f"no watched org could be read ({len(report.orgs)} unreachable): the Hub at "
                         f"{get_settings().shown_hub_endpoint} did not answer. Check the network; behind a proxy "
                         "set HTTPS_PROXY; for a mirror set DRAFTERS_HUB_ENDPOINT")
        incomplete = _incomplete(report)
        if incomplete:
            raise Partial(f"the poll is incomplete ({'; '.join(incomplete)}); what it read is recorded and the "
                          "rest is retried by the next poll")
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
    events = open_store().events.events(types=type_, org=org, family=family, since=_parse_since(since))
    if as_json:
        render.print_json(events)
        return
    render.table(
        "alerts",
        ["when", "type", "subject", "message"],
        [(e.created_at.strftime("%Y-%m-%d %H:%M"), e.type, e.subject, e.payload.get("message", "")) for e in events],
    )


def _secret_box() -> SecretBox:
    return SecretBox(get_settings().home_dir / "secrets.json")


@app.command("subscribe")
def subscribe_command(
    url: str,
    events: Annotated[str | None, typer.Option(help="Comma-separated event types (default: all).")] = None,
    org: Annotated[str | None, typer.Option()] = None,
    family: Annotated[str | None, typer.Option()] = None,
    repo: Annotated[str | None, typer.Option()] = None,
    secret_env: Annotated[
        str | None, typer.Option(help="Name of an environment variable holding the signing secret (whsec_… or raw).")
    ] = None,
    secret_out: Annotated[
        Path | None, typer.Option(help="Write the generated whsec_ signing secret to this file (mode 0600).")
    ] = None,
    unsigned: Annotated[bool, typer.Option("--unsigned", help="Send without a signature.")] = False,
) -> None:
    """Deliver matching events to a webhook (Slack-compatible JSON, Standard Webhooks signature).

    Without --secret-env a new whsec_ secret is generated; it is never printed: --secret-out writes it to a file
    for the receiver."""
    secret = None
    if secret_env is not None:
        secret = os.environ.get(secret_env)
        if not secret:
            raise UserError(f"environment variable {secret_env} is empty or unset")
    elif not unsigned:
        secret = alerts.new_secret()
    types = tuple(t.strip() for t in events.split(",") if t.strip()) if events else ()
    allow_internal = get_settings().webhook_allow_internal
    # Everything checked before anything is written: a refused subscription leaves no secret file behind.
    try:
        warning = alerts.check_subscription(url, secret=secret, event_types=types, allow_internal=allow_internal)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    store = open_store()
    if secret_out is not None and secret is not None:
        _write_private(secret_out, secret)
    try:
        record = alerts.subscribe(store, _secret_box(), url, event_types=types, org=org, family=family,
                                  repo=repo, secret=secret, allow_internal=allow_internal)
    except BaseException as exc:
        if secret_out is not None and secret is not None:
            secret_out.unlink(missing_ok=True)
        if isinstance(exc, ValueError):
            raise UserError(str(exc)) from None
        raise
    if warning:
        render.error_console.print(f"warning: {render.plain(warning)}", soft_wrap=True, highlight=False)
    render.console.print(
        f"subscription {record.uid} -> {render.plain(alerts.mask_webhook_url(record.url))} "
        f"({', '.join(record.event_types) or 'all events'})"
        + (" signed" if record.has_secret else " unsigned")
        + (f"; its secret is in {render.plain(secret_out)}" if secret_out is not None and record.has_secret else "")
        + (f"; generated whsec_ secret kept in {render.plain(_secret_box().path)} under its id"
           if secret_env is None and secret_out is None and record.has_secret else ""),
        soft_wrap=True, highlight=False)


def _write_private(path: Path, text: str) -> None:
    """Created 0600 before the secret is written; an existing file is not overwritten."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise UserError(f"{path} exists; choose a new file for the secret") from None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as handle:
        handle.write(text + "\n")


@app.command("subscriptions")
def subscriptions_command(as_json: JsonOption = False) -> None:
    """Webhook subscriptions (URLs masked: a webhook URL can be a credential)."""
    records = [dataclasses.replace(r, url=alerts.mask_webhook_url(r.url)) for r in alerts.subscriptions(open_store())]
    if as_json:
        render.print_json(records)
        return
    render.table("subscriptions", ["id", "url", "events", "org", "family", "repo", "signed", "active"],
                 [(r.uid, r.url, ",".join(r.event_types) or "all", r.org, r.family, r.repo, r.has_secret, r.active)
                  for r in records])


@app.command("unsubscribe")
def unsubscribe_command(uid: Annotated[str, typer.Argument(help="The subscription's id, as `subscribe` printed it.")]) -> None:
    """Stop delivering alerts to a subscription."""
    if not alerts.unsubscribe(open_store(), _secret_box(), uid):
        raise NotFound(f"no subscription {uid}")


@app.command("deliver")
def deliver_command() -> None:
    """Send pending webhook deliveries now (the long-running service does this on its own)."""
    report = alerts.deliver_pending(open_store(), _secret_box(),
                                     allow_internal=get_settings().webhook_allow_internal)
    render.console.print(f"deliveries: {report.delivered} delivered, {report.pending} pending, {report.failed} given up")


@app.command("feed")
def feed_command(out: Annotated[Path | None, typer.Option(help="Where to write the Atom feed.")] = None) -> None:
    """Write the Atom feed of events (default: $DRAFTERS_HOME/feed.atom)."""
    target = out or get_settings().home_dir / "feed.atom"
    # Checked before anything is written; the path is printed literally (`[/]` is a file name, not markup).
    if target.is_dir():
        raise UserError(f"{target} is a directory; --out takes a file path")
    path = write_feed(open_store().events.events(), target)
    render.console.print(f"feed written to {render.plain(path)}", highlight=False)


@app.command("status")
def status_command(as_json: JsonOption = False) -> None:
    """What each part of `drafters up` is doing, when it last succeeded and its last error; the watcher's orgs
    and quarantined repos. Reads the database, so it works from any process."""
    store = open_store()
    statuses = store.watch_state.service_statuses()
    failures = store.watch_state.watch_failures()
    cursors = store.watch_state.watch_cursors()
    if as_json:
        render.print_json({"services": statuses, "orgs": cursors, "failures": failures})
        return
    if not statuses:
        render.console.print("no `drafters up` has recorded a status in this database")
    for s in statuses:
        line = (f"{s.name:<8} {s.state:<10} heartbeat {_ago(s.heartbeat_at)}, last success "
                f"{_ago(s.last_success_at)}" + (f", restarted {s.restarts}x" if s.restarts else "")
                + f"  [{s.host}]")
        render.console.print(render.strip_control(line), markup=False, highlight=False)
        if s.detail:
            render.console.print(render.strip_control(f"         {s.detail}"), markup=False, highlight=False)
        if s.last_error:
            render.console.print(render.strip_control(f"         last error ({_ago(s.last_error_at)}): {s.last_error}"),
                                 markup=False, highlight=False)
    for c in cursors:
        line = f"  {c.org:<28} polled {_ago(c.polled_at)}" + (f"  error: {c.last_error}" if c.last_error else "")
        render.console.print(render.strip_control(line), markup=False, highlight=False)
    for f in failures:
        state = f"quarantined until {f.retry_at:%Y-%m-%d %H:%M} UTC" if f.retry_at else "will be retried"
        render.console.print(render.strip_control(f"  {f.repo_id}: {f.failures} failure(s), {state}: {f.last_error}"),
                             markup=False, highlight=False)


def _ago(when: datetime | None) -> str:
    if when is None:
        return "never"
    seconds = max(0, int((datetime.now(UTC) - when).total_seconds()))
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"


def _print_watched(watched: str, secret_env: str) -> None:
    """The webhook's watched names and domains as the Hub's form asks for them (the secret by its variable's name)."""
    render.console.print(render.strip_control(f"watched: {watched}"), markup=False, highlight=False)
    render.console.print(f"domains: repo   secret: the value of ${secret_env} (sent as X-Webhook-Secret)")


@app.command("hub-webhooks")
def hub_webhooks_command(
    url: Annotated[str, typer.Option(help="Public HTTPS URL of `drafters push-server` (behind a TLS proxy).")],
    secret_env: Annotated[str, typer.Option(help="Env var with the webhook's shared secret.")] = "DRAFTERS_HUB_WEBHOOK_SECRET",
    create: Annotated[bool, typer.Option("--create", help="Create the webhook on the Hub with the configured token.")] = False,
) -> None:
    """The Hub webhook that watches every watched org (repo changes only), so that polling is the safety net.

    Prints the settings to enter at huggingface.co/settings/webhooks; with --create (and a token) creates it."""
    settings = get_settings()
    orgs = watched_orgs(settings.watched_orgs)
    if not url.startswith("https://"):
        raise UserError("the Hub delivers webhooks to public https:// URLs only")
    render.console.print(render.strip_control(f"target URL: {mask_url(url)}"), markup=False, highlight=False)
    if not create:
        _print_watched(", ".join(orgs) + " (each as the org or user it is on the Hub)", secret_env)
        return
    token = settings.token_value()
    secret = os.environ.get(secret_env)
    if not token:
        raise UserError("creating a webhook needs a Hub token (HF_TOKEN or DRAFTERS_HF_TOKEN)")
    if not secret:
        raise UserError(f"set {secret_env} to the webhook's secret first")
    # A watched name is an org (Qwen) or a user (yuhuili); the Hub watches each under its own type.
    client = HubClient(settings.hub_endpoint, token, settings.hub_cache_dir, timeout=settings.hub_timeout_s)
    try:
        kinds = {name: client.namespace_kind(name) for name in orgs}
    except HubError as exc:
        raise Failed(f"cannot tell whether a watched name is an org or a user: {exc}") from None
    watched = [{"type": kinds[name], "name": name} for name in orgs]
    _print_watched(", ".join(f"{kinds[n]} {n}" for n in orgs), secret_env)
    try:
        info = HfApi(endpoint=settings.hub_endpoint, token=token).create_webhook(
            url=url, watched=watched, domains=["repo"], secret=secret)
    except Exception as exc:  # noqa: BLE001 - one line, never the token or the secret
        message = " ".join(str(exc).replace(token, "***").replace(secret, "***").split())[:300]
        raise Failed(f"the Hub refused the webhook: {type(exc).__name__}: {message}") from None
    render.console.print(render.strip_control(f"created webhook {info.id}"), markup=False, highlight=False)
