"""`drafters doctor`: check a running server's speculative decoding against what the registry knows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from drafters.cli import render
from drafters.cli.common import JsonOption, UserError, app, open_store
from registry.domain.doctor import diagnosis_json
from registry.domain.engines import SERVER_KINDS
from verifier.doctor import DEFAULT_MAX_NEW_TOKENS, DoctorReport, run_doctor
from verifier.ingest import public_url
from verifier.prompts import BUNDLED_SET_NAMES, PromptSet, bundled_set, load_prompt_file


def probe_set(value: str | None) -> PromptSet | None:
    """`--prompts`: a bundled set's name or a JSONL file; None: the doctor's default probe."""
    if value is None:
        return None
    if value in BUNDLED_SET_NAMES:
        return bundled_set(value)
    path = Path(value)
    if not path.is_file():
        raise UserError(f"--prompts takes a bundled set ({', '.join(BUNDLED_SET_NAMES)}) or a JSONL file; "
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
        help=f"A bundled prompt set ({', '.join(BUNDLED_SET_NAMES)}) or a JSONL file (default: 3 code and 3 chat "
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
    api_key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not api_key:
        raise UserError(f"environment variable {api_key_env} is not set")
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
