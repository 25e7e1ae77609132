"""`drafters`: a thin command line over registry/ (and verifier/ where installed)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from registry import compat, render
from registry.catalog_import import load_catalog
from registry.db import DatabaseError, head_revision, current_revision, upgrade
from registry.local import LocalRepoError, looks_like_folder, read_local_repo
from registry.reports import find_for_checkpoint, lag_by, lag_table, upgrade_table
from registry.settings import get_settings
from registry.store import NotFound, Store

if TYPE_CHECKING:
    from registry.secrets import SecretBox
    from registry.watch import PollReport, Watcher

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Speculative-decoding drafters: what exists, what fits, how long it took.")
db_app = typer.Typer(no_args_is_help=True, help="Database schema.")
catalog_app = typer.Typer(no_args_is_help=True, help="The bundled drafter catalog.")
app.add_typer(db_app, name="db")
app.add_typer(catalog_app, name="catalog")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit status 2."""


def open_store() -> Store:
    return Store.open(get_settings().resolved_database_url)


def today() -> datetime:
    return datetime.now(UTC)


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Bring the database schema to the newest migration."""
    store = open_store()
    render.console.print(f"database at revision {current_revision(store.engine)} (head {head_revision()})")


@catalog_app.command("load")
def catalog_load(as_json: JsonOption = False) -> None:
    """Load the bundled catalog; loading twice changes nothing."""
    store = open_store()
    summary = load_catalog(store)
    if as_json:
        render.print_json(summary)
        return
    render.console.print(
        f"catalog: {summary.drafters} drafters ({summary.dflash_21} of the 21 DFlash v1), "
        f"{summary.targets} targets; {summary.verdicts} verdicts computed"
    )


@app.command("find")
def find(repo_id: str, as_json: JsonOption = False) -> None:
    """Every drafter that fits a checkpoint, with its verdict, reasons and lag."""
    store = open_store()
    checkpoint, rows = find_for_checkpoint(store, repo_id)
    if as_json:
        render.print_json({"checkpoint": checkpoint, "drafters": rows})
        return
    render.table(
        f"drafters for {checkpoint.repo_id}",
        ["drafter", "method", "verdict", "released", "reasons"],
        [
            (r.drafter_repo_id, r.method, render.verdict(r.verdict), r.drafter_released, "; ".join(r.reasons))
            for r in rows
        ],
    )
    if not rows:
        render.console.print("no drafter in the registry fits this checkpoint")


def _resolve_side(store: Store, value: str, *, drafter: bool) -> tuple[dict | None, str | None, str | None, tuple[str, ...], str | None, str | None]:
    """(config, tokenizer digest, repo id, declared targets, method, problem) for a repo id or a local folder."""
    from registry import configs

    if looks_like_folder(value):
        local = read_local_repo(Path(value))
        try:
            config = configs.parse_config(local.config_raw)
        except configs.ConfigError as exc:
            return None, local.tokenizer_digest, None, (), None, str(exc)
        method = (configs.detect_method(config) or "draft-lm") if drafter else None
        return config, local.tokenizer_digest, None, (), method, None
    if drafter:
        record = store.get_drafter(value)
        if record is None:
            raise NotFound(f"unknown drafter {value!r}: not in the registry and not a folder")
        head = store.drafter_head_revision(value)
        targets = tuple(store.canonical_repo_id(t) for t, _ in record.targets)
        return (head.config if head else None), None, record.repo_id, targets, record.method, (head.config_problem if head else None)
    checkpoint = store.get_checkpoint(value)
    if checkpoint is None:
        raise NotFound(f"unknown checkpoint {value!r}: not in the registry and not a folder")
    head = store.head_revision(value)
    return (
        head.config if head else None,
        head.tokenizer_digest if head else None,
        checkpoint.repo_id,
        (),
        None,
        head.config_problem if head else None,
    )


@app.command("check")
def check(drafter: str, target: str, as_json: JsonOption = False) -> None:
    """The verdict for one pair; each side is a repo id the registry knows or a local folder with config.json."""
    store = open_store()
    d_config, d_tok, d_repo, declared, method, d_problem = _resolve_side(store, drafter, drafter=True)
    t_config, t_tok, t_repo, _, _, t_problem = _resolve_side(store, target, drafter=False)
    if d_problem and d_config is None:
        raise UserError(f"drafter config unusable: {d_problem}")
    result = compat.check_pair(
        d_config,
        t_config,
        drafter_method=method,
        target_repo_id=t_repo,
        declared_targets=declared,
        drafter_tokenizer_digest=d_tok,
        target_tokenizer_digest=t_tok,
        target_problem=t_problem,
    )
    if as_json:
        render.print_json({"drafter": drafter, "target": target, "method": method, **render.to_jsonable(result)})
        return
    render.console.print(f"{drafter} -> {target}: {render.verdict(result.verdict)} ({method})")
    for check_ in result.checks:
        mark = {True: "[green]ok[/]", False: "[red]FAIL[/]", None: "[yellow]unchecked[/]"}[check_.ok]
        render.console.print(f"  {mark:>20} {check_.name}: {check_.detail}")


@app.command("lag")
def lag_command(
    as_json: JsonOption = False,
    by: Annotated[str | None, typer.Option(help="Summarize by 'family' or 'publisher'.")] = None,
    upgrades: Annotated[bool, typer.Option(help="Base upgrades still waiting for a drafter.")] = False,
) -> None:
    """Drafter lag per target, worst first: days from the target's release to its first exact drafter."""
    store = open_store()
    now = today().date()
    if upgrades:
        rows_u = upgrade_table(store, now)
        if as_json:
            render.print_json(rows_u)
            return
        render.table(
            "base upgrades",
            ["successor", "predecessor", "predecessor's drafters", "released", "lag (days)", "status"],
            [(r.successor_repo_id, r.predecessor_repo_id, ", ".join(r.predecessor_drafters), r.released,
              r.lag_days, "waiting" if r.open else "closed") for r in rows_u],
        )
        return
    rows = lag_table(store, now)
    if by is not None:
        if by not in ("family", "publisher"):
            raise UserError("--by takes 'family' or 'publisher'")
        groups = lag_by(rows, by, store)
        if as_json:
            render.print_json(groups)
            return
        render.table(f"lag by {by}", [by, "targets", "median days", "worst days", "open"],
                     [(name, g.n, g.median_days, g.worst_days, g.open_count) for name, g in groups.items()])
        return
    if as_json:
        render.print_json(rows)
        return
    render.table(
        f"drafter lag as of {now}",
        ["target", "released", "first exact drafter", "drafter released", "lag (days)", "status"],
        [(r.target_repo_id, f"{r.released}{'' if r.released_precision in (None, 'day') else ' ≈'}",
          r.first_drafter_repo_id, r.first_drafter_released, r.lag_days, "open" if r.open else "closed") for r in rows],
    )


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
        render.console.print(f"  [bold]{event.type}[/] {event.payload.get('message', event.subject)}")


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


@app.command("up")
def up() -> None:
    """The main job: upgrade the database, load the catalog, and run what this install has."""
    settings = get_settings()
    store = open_store()
    summary = load_catalog(store)
    render.console.print(
        f"database {settings.resolved_database_url} at head; catalog: {summary.drafters} drafters, "
        f"{summary.targets} targets"
    )


def main() -> None:
    try:
        app(standalone_mode=False)
    except (DatabaseError, NotFound, UserError, LocalRepoError) as exc:
        message = exc.args[0] if exc.args else str(exc)
        render.error_console.print(f"[red]error:[/] {message}", soft_wrap=True, highlight=False)
        sys.exit(2 if isinstance(exc, UserError) else 1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
