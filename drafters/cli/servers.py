"""Commands against servers a user runs: `doctor` (is speculation on, and as good as the registry expects) and
`sweep` (the speedup at each concurrency, with and without the drafter)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from drafters.cli import render
from drafters.cli.common import JsonOption, UserError, app, open_store
from drafters.cli.runs_view import curves_json, print_curves
from registry.domain.curve import CurvePoint
from registry.domain.doctor import diagnosis_json
from registry.domain.engines import SERVER_KINDS
from verifier.doctor import DEFAULT_MAX_NEW_TOKENS, DoctorReport, run_doctor
from verifier.ingest import public_url
from verifier.sweep import DEFAULT_CONCURRENCY, run_sweep
from verifier.sweep import DEFAULT_MAX_NEW_TOKENS as SWEEP_MAX_NEW_TOKENS
from verifier.prompts import ALL_SET_NAMES, PromptSet, bundled_set, load_prompt_file


def probe_set(value: str | None) -> PromptSet | None:
    """`--prompts`: a bundled set's name or a JSONL file; None: the doctor's default probe."""
    if value is None:
        return None
    if value in ALL_SET_NAMES:
        return bundled_set(value)
    path = Path(value)
    if not path.is_file():
        raise UserError(f"--prompts takes a bundled set ({', '.join(ALL_SET_NAMES)}) or a JSONL file; "
                        f"{value!r} is neither")
    return load_prompt_file(path)


def report_lines(report: DoctorReport, url: str) -> list[str]:
    facts, expected = report.facts, report.expected
    tau = f"τ {facts.tau:.2f}" if facts.tau is not None else "τ unknown"
    lines = [f"{public_url(url)}: {facts.engine} {facts.engine_version or '(version unknown)'}, target "
             f"{expected.target or 'unknown'}, drafter {expected.drafter or 'unknown'}; probe: {report.probe.prompts} "
             f"prompts, {report.probe.output_tokens} tokens, {facts.drafts if facts.drafts is not None else '?'} "
             f"drafting steps, {tau}"]
    for finding in report.diagnosis.findings:
        lines.append(("problem: " if finding.problem else "note: ") + finding.message)
        if finding.problem and finding.fix:
            lines.append(f"  fix: {finding.fix}")
        if finding.problem and finding.sources:
            lines.append(f"  seen in: {', '.join(finding.sources)}")
    if report.run is not None:
        lines.append(f"recorded as run {report.run.run_id[:12] if report.run.run_id else '?'}")
    for kind in report.events:
        lines.append(f"raised {kind}")
    lines.append("healthy" if report.diagnosis.healthy else "not healthy")
    return lines


@app.command("doctor")
def doctor_command(
    url: Annotated[str, typer.Option(help="The server's base URL, e.g. http://127.0.0.1:8080.")],
    engine: Annotated[str | None, typer.Option(help="llamacpp, vllm or sglang (default: found from the server).")] = None,
    prompts: Annotated[str | None, typer.Option(
        help=f"A bundled prompt set ({', '.join(ALL_SET_NAMES)}) or a JSONL file (default: 3 code and 3 chat "
             "prompts).")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="Tokens generated per probe prompt.")] = DEFAULT_MAX_NEW_TOKENS,
    target: Annotated[str | None, typer.Option(help="The served target's repo id or folder (default: what the "
                                                    "server names, or the registry's match of its GGUF).")] = None,
    drafter: Annotated[str | None, typer.Option(help="The served drafter's repo id or folder.")] = None,
    hardware: Annotated[str | None, typer.Option(help="What the server runs on, e.g. 'RTX 3060 12GB' (recorded "
                                                      "with the probe).")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="Name of an environment variable holding the server's API key (never stored).")] = None,
    record: Annotated[bool, typer.Option("--record/--no-record",
                                         help="Store the probe as a run and raise its events.")] = True,
    as_json: JsonOption = False,
) -> None:
    """Is speculation really on? Probe a running server and compare it with what the registry knows of the pair.

    Exit 0 when healthy, 1 when a problem is found, 2 when the request itself is wrong (or the server cannot be read).
    """
    if engine is not None and engine not in SERVER_KINDS:
        raise UserError(f"--engine takes {', '.join(SERVER_KINDS)}, got {engine!r}")
    if max_new_tokens < 1:
        raise UserError("--max-new-tokens must be at least 1")
    api_key = _api_key(api_key_env)
    prompt_set = probe_set(prompts)
    store = open_store()
    with Progress(TextColumn("[bold]probing"), BarColumn(), MofNCompleteColumn(), console=render.error_console,
                  transient=True) as progress:
        task = progress.add_task("probe", total=None)
        report = run_doctor(store, url, kind=engine, target=target, drafter=drafter, hardware=hardware,
                            prompt_set=prompt_set, max_new_tokens=max_new_tokens, api_key=api_key, record=record,
                            on_prompt=lambda done, total: progress.update(task, completed=done, total=total))
    if as_json:
        body = diagnosis_json(report.facts, report.expected, report.diagnosis)
        body.update(url=public_url(url), run=report.run.run_id if report.run else None, raised=list(report.events))
        render.print_json(body)
    else:
        # The server's strings (model names, versions) are outside text: printed inert.
        for line in report_lines(report, url):
            render.console.print(render.strip_control(line), markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(0 if report.diagnosis.healthy else 1)


def _api_key(variable: str | None) -> str | None:
    value = os.environ.get(variable) if variable else None
    if variable and not value:
        raise UserError(f"environment variable {variable} is not set")
    return value


def thinking_modes(text: str | None) -> list[bool | None]:
    """`--thinking`: None (raw text), or the modes asked for, in order."""
    if text is None:
        return [None]
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if not words or any(w not in ("on", "off") for w in words):
        raise UserError(f"--thinking takes on, off or on,off; got {text!r}")
    return [w == "on" for w in dict.fromkeys(words)]


def _levels(text: str, option: str, limit: int = 1024) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"{option} takes numbers separated by commas, e.g. 1,4,16; got {text!r}") from None
    if not levels or min(levels) < 1 or max(levels) > limit:
        raise UserError(f"{option} takes values from 1 to {limit}")
    return sorted(set(levels))


@app.command("sweep")
def sweep_command(
    url: Annotated[str, typer.Option(help="The speculative server (target + drafter).")],
    baseline_url: Annotated[str, typer.Option(help="A server of the same target without the drafter.")],
    concurrency: Annotated[str, typer.Option(help="Concurrent clients per level.")] = ",".join(
        map(str, DEFAULT_CONCURRENCY)),
    prompts: Annotated[str | None, typer.Option(
        help=f"A bundled prompt set ({', '.join(ALL_SET_NAMES)}) or a JSONL file (default: 3 code and 3 chat "
             "prompts).")] = None,
    max_new_tokens: Annotated[str, typer.Option(
        help="Tokens generated per request; several (128,512,2048) sweep each length, one curve per length.")
    ] = str(SWEEP_MAX_NEW_TOKENS),
    requests_per_level: Annotated[int | None, typer.Option(
        help="Requests per level (default: 2 per client, at least 8).")] = None,
    target: Annotated[str | None, typer.Option(help="The target's repo id (default: what the server names).")] = None,
    drafter: Annotated[str | None, typer.Option(help="The drafter's repo id.")] = None,
    hardware: Annotated[str | None, typer.Option(help="What the servers run on, e.g. 'RTX 3060 12GB'.")] = None,
    engine: Annotated[str | None, typer.Option(help="llamacpp, vllm or sglang (default: found from the server).")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Variable holding the speculative server's API key.")] = None,
    baseline_api_key_env: Annotated[str | None, typer.Option(help="Variable holding the baseline's API key.")] = None,
    thinking: Annotated[str | None, typer.Option(
        help="on, off or on,off: send chats through the server's chat template with enable_thinking so, one curve "
             "per mode (thinking recorded only where the template reads it). Default: raw text, no template.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The speedup at each concurrency: both servers under the same closed-loop load, the crossover where the
    drafter stops paying, stored as one curve."""
    if engine is not None and engine not in SERVER_KINDS:
        raise UserError(f"--engine takes {', '.join(SERVER_KINDS)}, got {engine!r}")
    if requests_per_level is not None and requests_per_level < 1:
        raise UserError("--requests-per-level must be at least 1")
    levels = _levels(concurrency, "--concurrency")
    lengths = _levels(max_new_tokens, "--max-new-tokens", limit=1 << 20)
    modes = thinking_modes(thinking)
    keys = _api_key(api_key_env), _api_key(baseline_api_key_env)
    prompt_set = probe_set(prompts)
    store = open_store()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[now]}"), console=render.error_console, transient=True) as progress:
        task = progress.add_task("sweep", total=len(levels) * len(lengths) * len(modes), now=f"c={levels[0]}")
        curves = []
        for mode in modes:
            for length in lengths:
                def on_level(done: int, total: int, point: CurvePoint, length: int = length) -> None:
                    progress.update(task, advance=1,
                                    now=f"{length} tokens, c={point.concurrency}: {point.speedup:.2f}×")

                curve = run_sweep(store, url, baseline_url, concurrency=levels, prompt_set=prompt_set,
                                  max_new_tokens=length, requests_per_level=requests_per_level, target=target,
                                  drafter=drafter, hardware=hardware, kind=engine, api_key=keys[0],
                                  baseline_api_key=keys[1], thinking=mode, on_level=on_level,
                                  provenance={"thinking_asked": mode})
                curves.append(curve)
    if as_json:
        render.print_json(curves_json(curves))
        return
    print_curves(curves)
