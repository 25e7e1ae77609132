"""Commands that measure pairs: verify, compare, runs, gguf, ingest, worker (how runs are shown: runs_view.py)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from drafters.cli import render
from drafters.cli.common import Failed, JsonOption, UserError, app, open_store, pair_order
from drafters.cli.runs_view import curves_json, fmt, print_curves, print_runs, run_json
from registry import calibration
from registry.domain.engines import SERVER_KINDS, VERIFIER_ENGINES as ENGINES
from registry.domain.measurement import AUTO_DTYPE, DEFAULT_MAX_NEW_TOKENS, DEFAULT_REPEATS, RunSettings
from registry.domain.run import Run
from registry.settings import get_settings
from registry.store import Store
from registry.store.jobs import JobRecord
from verifier.engines.llamacpp.convert import convert_pair, run_converter
from verifier.curve_job import BATCH_ONE_ONLY, CurveFailed, CurveRequest
from verifier.ingest import ingest_server
from verifier.jobs import (VerifyRequest, Worker, curve_now, enqueue as enqueue_job, enqueue_curve, verify_now,
                           with_fetched_folders)
from verifier.prompts import ALL_SET_NAMES, BUNDLED_SET_NAMES, load_prompt_file
from verifier.ray_executor import RayExecutor
from verifier.sweep import DEFAULT_MAX_NEW_TOKENS as SWEEP_MAX_NEW_TOKENS

# Every import above stays free of torch (tests/test_layers.py checks that the command line starts without it).


def _verify_request(target: str, drafter: str | None, *, prompts: list[Path] | None, sets: str | None,
                    method: str | None, max_new_tokens: int, temperature: float, seed: int, repeats: int,
                    device: str, dtype: str, draft_length: int | None, thinking: bool,
                    target_revision: str | None = None, drafter_revision: str | None = None,
                    engine: str = "pytorch") -> VerifyRequest:
    if engine not in ENGINES:
        raise UserError(f"--engine takes {' or '.join(ENGINES)}, got {engine!r}")
    if sets is None:
        chosen = () if prompts else BUNDLED_SET_NAMES
    else:
        chosen = tuple(s.strip() for s in sets.split(",") if s.strip())
        unknown = set(chosen) - set(ALL_SET_NAMES)
        if unknown:
            raise UserError(f"unknown prompt sets {sorted(unknown)}; bundled: {', '.join(ALL_SET_NAMES)}")
    for path in prompts or []:
        if not path.is_file():
            raise UserError(f"prompt file {path} does not exist")
        load_prompt_file(path)  # a bad line is the user's to fix before any model loads
    try:
        settings = RunSettings(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, repeats=repeats,
                               device=device, dtype=dtype, draft_length=draft_length, method=method,
                               enable_thinking=thinking)
    except ValueError as error:  # the user's to fix before any model loads, as a bad prompt file is
        raise UserError(str(error)) from None
    return VerifyRequest(target=target, drafter=drafter, target_revision=target_revision,
                         drafter_revision=drafter_revision, prompt_sets=chosen,
                         prompt_files=tuple(str(p) for p in prompts or ()), settings=settings, engine=engine)


def run_with_progress(store: Store, request: VerifyRequest, label: str) -> Run:
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[now]}"),
                  TimeElapsedColumn(), console=render.error_console, transient=True) as progress:
        task = progress.add_task(label, total=None, now="loading")

        def report(done: int, total: int, now: str) -> None:
            progress.update(task, completed=done, total=total, now=now)

        request, folders = with_fetched_folders(store, request)  # a repo id `drafters fetch` downloaded
        return verify_now(store, request, progress=report, folders=folders)


PromptsOption = Annotated[list[Path] | None, typer.Option("--prompts", help="JSONL prompt file (repeatable).")]
SetsOption = Annotated[str | None, typer.Option(
    help="Bundled prompt sets, comma-separated (default: code, math, chat, multilingual; per kind of prompt: "
         "cat-coding, cat-math, cat-reasoning, cat-chat, cat-summarization, cat-translation, cat-long-context, "
         "cat-writing).")]
DtypeHelp = "auto (default: bfloat16 on CUDA, float32 on a CPU), float32, bfloat16 or float16."
EngineHelp = "pytorch (default) or llamacpp (llama-server; needs the llamacpp extra)."


@app.command("verify")
def verify_command(
    target: str,
    drafter: str,
    prompts: PromptsOption = None,
    sets: SetsOption = None,
    method: Annotated[str | None, typer.Option(help="Override the method read from the drafter's config.")] = None,
    max_new_tokens: Annotated[str | None, typer.Option(help=(
        f"Tokens generated per prompt (default {DEFAULT_MAX_NEW_TOKENS}); with --concurrency several, e.g. "
        f"128,512,2048: one curve per length (default {SWEEP_MAX_NEW_TOKENS})."))] = None,
    temperature: Annotated[float, typer.Option()] = 0.0,
    seed: Annotated[int, typer.Option()] = 0,
    repeats: Annotated[int, typer.Option(help="Measured repeats (speed spread is over them).")] = DEFAULT_REPEATS,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda, cuda:1 ...")] = "auto",
    dtype: Annotated[str, typer.Option(help=DtypeHelp)] = AUTO_DTYPE,
    draft_length: Annotated[int | None, typer.Option(help="Drafted tokens per round (default: the method's).")] = None,
    thinking: Annotated[bool, typer.Option(help="Render chat prompts with thinking on.")] = False,
    engine: Annotated[str, typer.Option(help=EngineHelp)] = "pytorch",
    concurrency: Annotated[str | None, typer.Option(help=(
        "Measure the speedup curve instead, at these concurrencies (e.g. 1,2,4,8): llama.cpp only, two "
        "llama-servers with one parallel slot per client; the PyTorch engine is batch 1 only."))] = None,
    thinking_both: Annotated[bool, typer.Option("--thinking-both", help=(
        "With --concurrency: each curve with thinking on and off (recorded only where the chat template reads "
        "enable_thinking)."))] = False,
    requests_per_level: Annotated[int | None, typer.Option(help=(
        "With --concurrency: requests per level (default: 2 per client, at least 8)."), min=1)] = None,
    enqueue: Annotated[bool, typer.Option("--enqueue", help="Queue it for `drafters worker` instead.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Run real speculative decoding for one (target, drafter) pair: lossless check, τ, speedup, memory; with
    --concurrency, its speedup curve over concurrent requests on llama.cpp."""
    lengths = _lengths(max_new_tokens, curve=concurrency is not None)
    store = open_store()
    target, drafter = pair_order(store, target, drafter, command="verify", roles=("target", "drafter"))
    request = _verify_request(target, drafter, prompts=prompts, sets=sets, method=method,
                              max_new_tokens=lengths[0], temperature=temperature, seed=seed, repeats=repeats,
                              device=device, dtype=dtype, draft_length=draft_length, thinking=thinking,
                              engine=engine)
    if concurrency is not None:
        if temperature != 0.0:
            raise UserError("a speedup curve is measured at temperature 0 (greedy, as the sweep sends)")
        curve_request = _curve_request(request, concurrency, lengths, thinking_both, requests_per_level)
        _verify_curve(store, curve_request, enqueue=enqueue, as_json=as_json)
        return
    if thinking_both or requests_per_level is not None:
        raise UserError("--thinking-both and --requests-per-level go with --concurrency (a speedup curve)")
    if enqueue:
        job = enqueue_job(store, request)
        if as_json:
            render.print_json({"job_id": job.id if job else None})
        else:
            render.console.print(f"queued job {job.id if job else '?'}; run `drafters worker` to process it")
        return
    record = run_with_progress(store, request, f"{Path(drafter).name} on {Path(target).name}")
    if as_json:
        render.print_json(run_json(record))
    else:
        print_runs([record])
    if record.status != "ok":
        raise Failed(f"the run failed: {record.failure_reason or 'no reason recorded'}")


def _lengths(text: str | None, *, curve: bool) -> list[int]:
    if text is None:
        return [SWEEP_MAX_NEW_TOKENS if curve else DEFAULT_MAX_NEW_TOKENS]
    try:
        lengths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"--max-new-tokens takes a number (with --concurrency, numbers like 128,512); got {text!r}") from None
    if not lengths or lengths[0] < 1:
        raise UserError("--max-new-tokens must be at least 1")
    if len(lengths) > 1 and not curve:
        raise UserError("several --max-new-tokens go with --concurrency (one curve per length); a run takes one")
    return lengths


def _curve_request(request: VerifyRequest, concurrency: str, lengths: list[int], thinking_both: bool,
                   requests_per_level: int | None) -> CurveRequest:
    if request.engine != "llamacpp":
        raise UserError(BATCH_ONE_ONLY)
    try:
        levels = sorted({int(part) for part in concurrency.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"--concurrency takes numbers separated by commas, e.g. 1,2,4,8; got {concurrency!r}") from None
    if not levels or levels[0] < 1 or levels[-1] > 256:
        raise UserError("--concurrency takes values from 1 to 256 (one llama-server slot per client)")
    if request.drafter is None:
        raise UserError("a curve needs a drafter")
    modes = (True, False) if thinking_both else (request.settings.enable_thinking,)
    asked = request.settings  # what a curve loads the pair under; its lengths and thinking modes are its own
    settings = RunSettings(device=asked.device, dtype=asked.dtype, draft_length=asked.draft_length,
                           method=asked.method, seed=asked.seed)
    return CurveRequest(target=request.target, drafter=request.drafter, concurrency=tuple(levels),
                        lengths=tuple(lengths), thinking=modes, prompt_sets=request.prompt_sets,
                        prompt_files=request.prompt_files, requests_per_level=requests_per_level, settings=settings)


def _verify_curve(store: Store, request: CurveRequest, *, enqueue: bool, as_json: bool) -> None:
    slots = f"llama.cpp, {max(request.concurrency)} parallel slots per server; the PyTorch engine is batch 1 only"
    if enqueue:
        job = enqueue_curve(store, request)
        if as_json:
            render.print_json({"job_id": job.id if job else None})
        else:
            render.console.print(f"queued curve job {job.id if job else '?'} ({slots}); run `drafters worker` "
                                 "to process it")
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[now]}"), TimeElapsedColumn(), console=render.error_console,
                  transient=True) as progress:
        task = progress.add_task("curve", total=None, now="loading")
        try:
            curves = curve_now(store, request, progress=lambda done, total, now: progress.update(
                task, completed=done, total=total, now=now))
        except CurveFailed as error:
            raise Failed(f"the curve failed: {error}") from None
    if as_json:
        render.print_json(curves_json(curves))
        return
    render.console.print(f"measured on {slots}")
    print_curves(curves)


@app.command("compare")
def compare_command(
    target: str,
    drafters: Annotated[list[str], typer.Argument(help="Two or more drafters to run on the same target and prompts.")],
    prompts: PromptsOption = None,
    sets: SetsOption = None,
    max_new_tokens: Annotated[int, typer.Option()] = DEFAULT_MAX_NEW_TOKENS,
    temperature: Annotated[float, typer.Option()] = 0.0,
    seed: Annotated[int, typer.Option()] = 0,
    repeats: Annotated[int, typer.Option(help="Measured repeats (speed spread is over them).")] = DEFAULT_REPEATS,
    device: Annotated[str, typer.Option()] = "auto",
    dtype: Annotated[str, typer.Option(help=DtypeHelp)] = AUTO_DTYPE,
    engine: Annotated[list[str] | None, typer.Option(help=f"Repeatable: {EngineHelp}")] = None,
    as_json: JsonOption = False,
) -> None:
    """The priced comparison: several drafters (or engines) on one target, same prompts, τ, per-position acceptance,
    speed, memory; each engine is its own row, never averaged with another."""
    engines = list(dict.fromkeys(engine or ["pytorch"]))
    if len(drafters) * len(engines) < 2:
        raise UserError("compare needs at least two drafters, or one drafter and two engines")
    store = open_store()
    if len(drafters) >= 2:  # the target given among the drafters: its place is first
        for number, drafter in enumerate(drafters):
            target, drafters[number] = pair_order(store, target, drafter, command="compare", roles=("target", "drafter"))
    records = []
    for drafter in drafters:
        for chosen in engines:
            request = _verify_request(target, drafter, prompts=prompts, sets=sets, method=None,
                                      max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                                      repeats=repeats, device=device, dtype=dtype, draft_length=None, thinking=False,
                                      engine=chosen)
            records.append(run_with_progress(store, request, f"{Path(drafter).name} on {Path(target).name} ({chosen})"))
    if as_json:
        for record in records:
            render.print_json(run_json(record))
    else:
        print_runs(records)
    failed = [r for r in records if r.status != "ok"]
    if failed:
        raise Failed(f"{len(failed)} of {len(records)} runs failed: {failed[0].failure_reason or 'no reason recorded'}")


@app.command("runs")
def runs_command(
    target: Annotated[str | None, typer.Option()] = None,
    drafter: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many runs (at least 1).")] = 50,
    as_json: JsonOption = False,
) -> None:
    """Stored benchmark runs, newest first."""
    store = open_store()
    records = store.runs.list_runs(target=target, drafter=drafter, limit=limit)
    # Stored predictions of the current model as they are; older or missing ones computed now (nothing written).
    predictions = calibration.current_predictions(store, records)
    if as_json:
        render.print_json([run_json(r, predictions.get(r.run_id)) for r in records])
        return
    print_runs(records, predictions)


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
    for folder in (target, drafter):
        if folder is not None and not folder.is_dir():
            raise UserError(f"{folder} is not a model folder")
    files = [f for f in convert_pair(target, drafter, out, outtype=outtype) if f is not None]
    if as_json:
        render.print_json([{**f.provenance(), "path": str(f.path)} for f in files])
        return
    render.table("GGUF files", ["file", "architecture", "quantization", "size", "sha256"],
                 [(str(f.path), f.architecture, f.file_type, f"{f.size_bytes / 2**20:.1f} MiB", f.sha256[:16])
                  for f in files])


@app.command("convert-hf-to-gguf", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def convert_hf_to_gguf_command(ctx: typer.Context) -> None:
    """Run llama.cpp's convert_hf_to_gguf.py of the installed llamacpp extra's build with these arguments as they
    are (the conversions `drafters launch --engine llamacpp` prints). Needs the llamacpp extra."""
    status = run_converter(list(ctx.args))
    if status != 0:
        raise typer.Exit(status)


@app.command("ingest")
def ingest_command(
    server: Annotated[str, typer.Argument(help="llamacpp, vllm or sglang.")],
    url: Annotated[str, typer.Option(help="The server's base URL, e.g. http://127.0.0.1:8080.")],
    hardware: Annotated[str, typer.Option(help="What it runs on, e.g. 'RTX 3060 12GB': one series per hardware.")],
    target: Annotated[str | None, typer.Option(help="The target's repo id (default: the model the server names).")] = None,
    drafter: Annotated[str | None, typer.Option(help="The drafter's repo id.")] = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="Name of an environment variable holding the server's API key (sent as a bearer token, never stored).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Record a run from a server you already run (its speculative counters since boot), beside everyone else's."""
    if server not in SERVER_KINDS:
        raise UserError(f"ingest takes {', '.join(SERVER_KINDS)}, got {server!r}")
    api_key = os.environ.get(api_key_env) if api_key_env else None
    if api_key_env and not api_key:
        raise UserError(f"environment variable {api_key_env} is not set")
    record = ingest_server(open_store(), server, url, hardware=hardware, target=target, drafter=drafter,
                           api_key=api_key)
    if as_json:
        render.print_json(run_json(record))
        return
    # The engine version and model name come from the server: printed inert.
    render.console.print(render.strip_control(
        f"run {record.run_id[:12]}: {record.engine} {record.engine_version or ''} on {record.hardware}, "
        f"{record.target}: τ {fmt(record.tau)}, acceptance {fmt(record.acceptance_rate)}, "
        f"{fmt(record.tokens_per_s, '.1f')} tok/s"), markup=False, highlight=False)


@app.command("worker")
def worker_command(
    once: Annotated[bool, typer.Option("--once", help="Work until the queue is empty, then exit.")] = False,
    executor: Annotated[str, typer.Option(help="local (default) or ray.")] = "local",
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address for --executor ray.")] = None,
) -> None:
    """Claim queued verification jobs and run them (a lease with heartbeats; a dead worker's job is retried)."""
    store = open_store()
    worker = Worker(store)
    close: Callable[[], None] = lambda: None  # noqa: E731
    if executor == "ray":
        ray_executor = RayExecutor(address=ray_address, database_url=get_settings().resolved_database_url)
        worker.executor, close = ray_executor, ray_executor.close
    elif executor != "local":
        raise UserError("--executor takes 'local' or 'ray'")

    def report(job: JobRecord) -> None:
        render.console.print(render.strip_control(f"job {job.id}: {job.status}" + (f" ({job.error})" if job.error else "")),
                             markup=False, highlight=False)

    def on_sigterm(*_: object) -> None:
        # As Ctrl-C: it also interrupts a wait on a Ray task. The job's lease then lapses and it is retried.
        raise KeyboardInterrupt

    # SIGTERM (systemd, docker stop, kill) stops the worker as Ctrl-C does, so the Ray instance it started stops too.
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    stop = threading.Event()
    try:
        if once:
            while (job := worker.work_once()) is not None:
                report(job)
            return
        render.console.print(f"{worker.worker_id} waiting for jobs")
        worker.run_forever(stop, on_job=report)
    except KeyboardInterrupt:
        stop.set()
        render.console.print("stopping")
    finally:
        close()
        signal.signal(signal.SIGTERM, previous)
