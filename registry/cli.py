"""`drafters`: a thin command line over registry/ (and verifier/ where installed)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from registry import compat, render
from registry.catalog_import import load_catalog
from registry.db import DatabaseError, current_revision, head_revision
from registry.local import LocalRepoError, looks_like_folder, read_local_repo
from registry.reports import find_for_checkpoint, lag_by, lag_table, upgrade_table
from registry.settings import get_settings
from registry.store import NotFound, Store

if TYPE_CHECKING:
    from registry.jobs import JobRecord
    from registry.runs import RunRecord
    from registry.secrets import SecretBox
    from verifier.jobs import VerifyRequest
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


@db_app.command("readonly-role")
def db_readonly_role(
    name: Annotated[str, typer.Argument(help="The role to create, e.g. drafters_dashboard.")],
    password_env: Annotated[str, typer.Option("--password-env", help="Environment variable holding its password.")],
) -> None:
    """Create (or renew) a PostgreSQL role that can read the registry and write nothing, for the dashboard."""
    import os

    from registry.roles import RoleError, create_readonly_role

    password = os.environ.get(password_env)
    if not password:
        raise UserError(f"environment variable {password_env} is not set or empty: put the role's password there")
    try:
        role = create_readonly_role(open_store().engine, name, password)
    except RoleError as exc:
        raise UserError(str(exc)) from None
    render.console.print(f"role {role.name} {'created' if role.created else 'renewed'}: it can connect to "
                         f"{role.database} and read every registry table; it cannot write")


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


def _verify_request(target: str, drafter: str | None, *, prompts: list[Path] | None, sets: str | None,
                    method: str | None, max_new_tokens: int, temperature: float, seed: int, repeats: int,
                    device: str, dtype: str, draft_length: int | None, thinking: bool,
                    target_revision: str | None = None, drafter_revision: str | None = None,
                    engine: str = "pytorch") -> "VerifyRequest":
    from verifier.jobs import ENGINES, VerifyRequest
    from verifier.prompts import BUNDLED_SET_NAMES

    if engine not in ENGINES:
        raise UserError(f"--engine takes {' or '.join(ENGINES)}, got {engine!r}")
    if sets is None:
        chosen = () if prompts else BUNDLED_SET_NAMES
    else:
        chosen = tuple(s.strip() for s in sets.split(",") if s.strip())
        unknown = set(chosen) - set(BUNDLED_SET_NAMES)
        if unknown:
            raise UserError(f"unknown prompt sets {sorted(unknown)}; bundled: {', '.join(BUNDLED_SET_NAMES)}")
    for path in prompts or []:
        if not path.is_file():
            raise UserError(f"prompt file {path} does not exist")
    settings = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed, "repeats": repeats,
                "device": device, "dtype": dtype, "draft_length": draft_length, "method": method,
                "enable_thinking": thinking}
    return VerifyRequest(target=target, drafter=drafter, target_revision=target_revision,
                         drafter_revision=drafter_revision, prompt_sets=chosen,
                         prompt_files=tuple(str(p) for p in prompts or ()), settings=settings, engine=engine)


def _run_with_progress(store: Store, request: "VerifyRequest", label: str) -> "RunRecord":
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from verifier.jobs import verify_now

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[now]}"),
                  TimeElapsedColumn(), console=render.error_console, transient=True) as progress:
        task = progress.add_task(label, total=None, now="loading")

        def report(done: int, total: int, now: str) -> None:
            progress.update(task, completed=done, total=total, now=now)

        return verify_now(store, request, progress=report)


def _run_json(record: "RunRecord") -> dict:
    metrics = record.metrics
    return {
        "run_id": record.run_id,
        "status": record.status,
        "failure_reason": record.failure_reason,
        "engine": record.engine,
        "engine_version": record.engine_version,
        "target": record.target,
        "drafter": record.drafter,
        "method": record.method,
        "lossless": record.lossless,
        "tau": record.tau,
        "acceptance_rate": record.acceptance_rate,
        "per_position_acceptance": list(metrics.get("marginal") or []),
        "per_position_acceptance_conditional": list((metrics.get("per_position_acceptance") or {}).get("conditional") or []),
        "acceptance_histogram": metrics.get("acceptance_histogram"),
        "baseline_tokens_per_s": record.baseline_tokens_per_s,
        "tokens_per_s": record.tokens_per_s,
        "speedup": record.speedup,
        "ideal_speedup": metrics.get("ideal_speedup"),
        "efficiency": record.efficiency,
        "ttft_s": metrics.get("ttft_s"),
        "tpot_s": metrics.get("tpot_s"),
        "draft_time_share": metrics.get("draft_time_share"),
        "peak_memory_bytes": record.peak_memory_bytes,
        "target_weight_bytes": record.target_weight_bytes,
        "drafter_weight_bytes": record.drafter_weight_bytes,
        "per_set": {s.prompt_set: {"tau": s.tau, "acceptance_rate": s.acceptance_rate, "speedup": s.speedup,
                                   "speedup_spread": s.speedup_spread, "lossless": s.lossless,
                                   "per_position_acceptance": list(s.per_position_acceptance)} for s in record.sets},
        "provenance": record.provenance,
    }


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _label(ref: str | None) -> str:
    """Repo ids as they are; local folders by their last path part, so tables stay readable."""
    if ref is None:
        return "(baseline)"
    return Path(ref).name if looks_like_folder(ref) else ref


def _print_runs(records: list["RunRecord"]) -> None:
    render.table(
        "speculative decoding, measured",
        ["drafter", "engine", "method", "lossless", "τ", "accept", "base tok/s", "tok/s", "speedup", "efficiency", "peak mem", "run"],
        [
            (_label(r.drafter), r.engine, r.method, r.lossless, _fmt(r.tau), _fmt(r.acceptance_rate), _fmt(r.baseline_tokens_per_s, ".1f"),
             _fmt(r.tokens_per_s, ".1f"), _fmt(r.speedup), _fmt(r.efficiency),
             f"{(r.peak_memory_bytes or 0) / 2**20:.0f} MiB", r.run_id[:12])
            if r.status == "ok" else (_label(r.drafter), r.engine, r.method, "-", "-", "-", "-", "-", "-", "-", "-", f"[red]failed:[/] {r.failure_reason}")
            for r in records
        ],
    )
    for r in records:
        if r.status != "ok":
            continue
        render.table(
            f"{_label(r.drafter)} on {_label(r.target)} ({r.engine}): per prompt set",
            ["prompt set", "τ", "accept", "speedup (min-max spread)", "lossless", "per-position acceptance"],
            [(s.prompt_set, _fmt(s.tau), _fmt(s.acceptance_rate), f"{_fmt(s.speedup)} (±{_fmt(s.speedup_spread)})",
              s.lossless, " ".join(f"{m:.2f}" for m in s.per_position_acceptance[:8])) for s in r.sets],
        )


PromptsOption = Annotated[list[Path] | None, typer.Option("--prompts", help="JSONL prompt file (repeatable).")]
SetsOption = Annotated[str | None, typer.Option(help="Bundled prompt sets, comma-separated (default: all four).")]
EngineHelp = "pytorch (default) or llamacpp (llama-server; needs the llamacpp extra)."


@app.command("verify")
def verify_command(
    target: str,
    drafter: str,
    prompts: PromptsOption = None,
    sets: SetsOption = None,
    method: Annotated[str | None, typer.Option(help="Override the method read from the drafter's config.")] = None,
    max_new_tokens: Annotated[int, typer.Option()] = 64,
    temperature: Annotated[float, typer.Option()] = 0.0,
    seed: Annotated[int, typer.Option()] = 0,
    repeats: Annotated[int, typer.Option()] = 3,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:1 ...")] = "auto",
    dtype: Annotated[str, typer.Option()] = "float32",
    draft_length: Annotated[int | None, typer.Option(help="Drafted tokens per round (default: the method's).")] = None,
    thinking: Annotated[bool, typer.Option(help="Render chat prompts with thinking on.")] = False,
    engine: Annotated[str, typer.Option(help=EngineHelp)] = "pytorch",
    enqueue: Annotated[bool, typer.Option("--enqueue", help="Queue it for `drafters worker` instead.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Run real speculative decoding for one (target, drafter) pair: lossless check, τ, speedup, memory."""
    from verifier.jobs import enqueue as enqueue_job

    store = open_store()
    request = _verify_request(target, drafter, prompts=prompts, sets=sets, method=method,
                              max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, repeats=repeats,
                              device=device, dtype=dtype, draft_length=draft_length, thinking=thinking,
                              engine=engine)
    if enqueue:
        job = enqueue_job(store, request)
        if as_json:
            render.print_json({"job_id": job.id if job else None})
        else:
            render.console.print(f"queued job {job.id if job else '?'}; run `drafters worker` to process it")
        return
    record = _run_with_progress(store, request, f"{Path(drafter).name} on {Path(target).name}")
    if as_json:
        render.print_json(_run_json(record))
    else:
        _print_runs([record])
    if record.status != "ok":
        raise typer.Exit(1)


@app.command("compare")
def compare_command(
    target: str,
    drafters: Annotated[list[str], typer.Argument(help="Two or more drafters to run on the same target and prompts.")],
    prompts: PromptsOption = None,
    sets: SetsOption = None,
    max_new_tokens: Annotated[int, typer.Option()] = 64,
    temperature: Annotated[float, typer.Option()] = 0.0,
    seed: Annotated[int, typer.Option()] = 0,
    repeats: Annotated[int, typer.Option()] = 3,
    device: Annotated[str, typer.Option()] = "auto",
    dtype: Annotated[str, typer.Option()] = "float32",
    engine: Annotated[list[str] | None, typer.Option(help=f"Repeatable: {EngineHelp}")] = None,
    as_json: JsonOption = False,
) -> None:
    """The priced comparison: several drafters (or engines) on one target, same prompts, τ, per-position acceptance,
    speed, memory; each engine is its own row, never averaged with another."""
    engines = list(dict.fromkeys(engine or ["pytorch"]))
    if len(drafters) * len(engines) < 2:
        raise UserError("compare needs at least two drafters, or one drafter and two engines")
    store = open_store()
    records = []
    for drafter in drafters:
        for chosen in engines:
            request = _verify_request(target, drafter, prompts=prompts, sets=sets, method=None,
                                      max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                                      repeats=repeats, device=device, dtype=dtype, draft_length=None, thinking=False,
                                      engine=chosen)
            records.append(_run_with_progress(store, request, f"{Path(drafter).name} on {Path(target).name} ({chosen})"))
    if as_json:
        for record in records:
            render.print_json(_run_json(record))
    else:
        _print_runs(records)
    if any(r.status != "ok" for r in records):
        raise typer.Exit(1)


@app.command("runs")
def runs_command(
    target: Annotated[str | None, typer.Option()] = None,
    drafter: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option()] = 50,
    as_json: JsonOption = False,
) -> None:
    """Stored benchmark runs, newest first."""
    from registry.runs import list_runs

    records = list_runs(open_store(), target=target, drafter=drafter, limit=limit)
    if as_json:
        render.print_json([_run_json(r) for r in records])
        return
    _print_runs(records)


@app.command("gguf")
def gguf_command(
    target: Annotated[Path, typer.Argument(help="The target model folder.")],
    drafter: Annotated[Path | None, typer.Argument(help="Its drafter's folder (optional).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Folder for the GGUF files.")] = Path("gguf"),
    outtype: Annotated[str, typer.Option(help="f32, f16, bf16, q8_0 (llama.cpp's converter decides).")] = "f32",
    as_json: JsonOption = False,
) -> None:
    """Convert a target and its drafter to GGUF with llama.cpp's own converter (a DFlash, DSpark or EAGLE-3
    drafter with --target-model-dir: it has no embeddings or tokenizer of its own). Needs the llamacpp extra."""
    from verifier.llamacpp import ConversionFailed, LlamaCppMissing, convert_pair
    from verifier.loading import LoadError

    for folder in (target, drafter):
        if folder is not None and not folder.is_dir():
            raise UserError(f"{folder} is not a model folder")
    try:
        files = [f for f in convert_pair(target, drafter, out, outtype=outtype) if f is not None]
    except (ConversionFailed, LlamaCppMissing, LoadError) as exc:
        raise UserError(str(exc)) from None
    if as_json:
        render.print_json([{**f.provenance(), "path": str(f.path)} for f in files])
        return
    render.table("GGUF files", ["file", "architecture", "quantization", "size", "sha256"],
                 [(str(f.path), f.architecture, f.file_type, f"{f.size_bytes / 2**20:.1f} MiB", f.sha256[:16])
                  for f in files])


@app.command("ingest")
def ingest_command(
    server: Annotated[str, typer.Argument(help="llamacpp, vllm or sglang.")],
    url: Annotated[str, typer.Option(help="The server's base URL, e.g. http://127.0.0.1:8080.")],
    hardware: Annotated[str, typer.Option(help="What it runs on, e.g. 'RTX 3060 12GB': one series per hardware.")],
    target: Annotated[str | None, typer.Option(help="The target's repo id (default: the model the server names).")] = None,
    drafter: Annotated[str | None, typer.Option(help="The drafter's repo id.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Record a run from a server you already run (its speculative counters since boot), beside everyone else's."""
    from verifier.ingest import SERVER_KINDS, ServerReadError, ingest_server

    if server not in SERVER_KINDS:
        raise UserError(f"ingest takes {', '.join(SERVER_KINDS)}, got {server!r}")
    try:
        record = ingest_server(open_store(), server, url, hardware=hardware, target=target, drafter=drafter)
    except ServerReadError as exc:
        raise UserError(str(exc)) from None
    if as_json:
        render.print_json(_run_json(record))
        return
    render.console.print(
        f"run {record.run_id[:12]}: {record.engine} {record.engine_version or ''} on {record.hardware}, "
        f"{record.target}: τ {_fmt(record.tau)}, acceptance {_fmt(record.acceptance_rate)}, "
        f"{_fmt(record.tokens_per_s, '.1f')} tok/s", markup=False)


@app.command("worker")
def worker_command(
    once: Annotated[bool, typer.Option("--once", help="Work until the queue is empty, then exit.")] = False,
    executor: Annotated[str, typer.Option(help="local (default) or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address for --executor ray.")] = None,
) -> None:
    """Claim queued verification jobs and run them (a lease with heartbeats; a dead worker's job is retried)."""
    import threading

    from verifier.jobs import Worker

    store = open_store()
    worker = Worker(store)
    if executor == "ray":
        from verifier.ray_executor import RayExecutor, RayUnavailable

        try:
            worker.executor = RayExecutor(address=ray_address, database_url=get_settings().resolved_database_url)
        except RayUnavailable as exc:
            raise UserError(str(exc)) from None
    elif executor != "local":
        raise UserError("--executor takes 'local' or 'ray'")

    def report(job: "JobRecord") -> None:
        render.console.print(f"job {job.id}: {job.status}" + (f" ({job.error})" if job.error else ""))

    if once:
        while (job := worker.work_once()) is not None:
            report(job)
        return
    render.console.print(f"{worker.worker_id} waiting for jobs")
    stop = threading.Event()
    try:
        worker.run_forever(stop, on_job=report)
    except KeyboardInterrupt:
        stop.set()


@app.command("dashboard")
def dashboard_command(port: Annotated[int | None, typer.Option(help="Port on 127.0.0.1.")] = None) -> None:
    """Serve the Streamlit dashboard (read-only) on 127.0.0.1."""
    from dashboard.launch import LaunchError, launch

    settings = get_settings()
    open_store()  # the schema is brought to head before the read-only dashboard looks at it
    chosen = port or settings.dashboard_port
    try:
        process = launch(chosen, settings.resolved_database_url)
    except LaunchError as exc:
        raise UserError(str(exc)) from None
    render.console.print(f"dashboard: http://127.0.0.1:{chosen}/")
    try:
        process.wait()
    except KeyboardInterrupt:
        process.terminate()


@app.command("demo")
def demo_command(
    run: Annotated[bool, typer.Option("--run", help="Measure now instead of queueing for a worker.")] = False,
) -> None:
    """Build the tiny demo pairs (Qwen3 + draft LM + DFlash, Gemma-4 + assistant) and measure them."""
    from verifier.demo import build_demo_models, demo_requests, enqueue_demo

    store = open_store()
    say = lambda line: render.console.print(line, soft_wrap=True, markup=False)  # noqa: E731
    settings = get_settings()
    if not run:
        queued = enqueue_demo(store, settings.models_dir, say, max_new_tokens=settings.demo_max_new_tokens,
                              repeats=settings.demo_repeats)
        render.console.print(f"queued {queued} new jobs; `drafters worker --once` runs them")
        return
    models = build_demo_models(settings.models_dir, say)
    requests = demo_requests(models, max_new_tokens=settings.demo_max_new_tokens, repeats=settings.demo_repeats)
    records = [_run_with_progress(store, request, key) for key, request in requests]
    _print_runs(records)


@app.command("up")
def up(
    watch: Annotated[bool, typer.Option(help="Poll the Hub.")] = True,
    worker: Annotated[bool, typer.Option(help="Run verification jobs.")] = True,
    dashboard: Annotated[bool, typer.Option(help="Serve the dashboard.")] = True,
    demo: Annotated[bool, typer.Option(help="Build the tiny demo pairs and measure them once.")] = True,
) -> None:
    """The main job: upgrade the database, load the catalog, then watch, deliver alerts, verify and serve."""
    from registry.service import Service

    service = Service(get_settings(), open_store(),
                      lambda line: render.console.print(line, soft_wrap=True, markup=False, highlight=False))
    service.start(watch=watch, worker=worker, dashboard=dashboard, demo=demo)
    try:
        service.stop.wait()
    except KeyboardInterrupt:
        render.console.print("stopping")
    finally:
        service.close()


def main() -> None:
    import logging
    import os

    # Warnings reach the user through the commands' own output; DRAFTERS_LOG_LEVEL=INFO shows the details.
    logging.basicConfig(level=os.environ.get("DRAFTERS_LOG_LEVEL", "ERROR").upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", force=True)
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
