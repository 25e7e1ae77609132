"""Our verifier engine against transformers' `generate` on the same tiny pair, prompts and token accounting.

    .venv/bin/python bench/verifier.py [--device auto|cpu|cuda] [--size tiny|small] [--max-new-tokens N]
                                       [--repeats N] [--threads N] [--json OUT]

What it measures depends on the device. On a CPU with tiny models every forward costs about a millisecond, so the
numbers are the decode loop's overhead against `generate(assistant_model=…)` (Python, cache bookkeeping), not the
speedup a drafter gives a real target: read the ratios ours/HF, not the speedups. `--device cuda --size small` is
the GPU path, where forwards dominate and speedup and efficiency mean what they say.

Builds (or reuses from the model cache) a target, a draft LM and a trained DFlash drafter, then measures greedy
decoding of every bundled prompt:
- ours: `verifier.engines.pytorch.run_pair` for draft-lm and dflash (each with its own interleaved baseline);
- transformers: `generate()` plain, with `assistant_model=<draft LM>` drafting the same number of tokens, and
  with the DFlash drafter loaded as `MuseGlimmerAssistantModel` and `speculation_type="dflash"`.
Each of `--repeats` (default 5) cycles measures ours and theirs back to back (so load drift hits both); the table
shows the median over cycles and its min–max of tok/s (pooled generated tokens / wall time, prefill included on
both sides) and of the ratio ours/theirs, then τ, τ_emitted, the speedup against our interleaved baseline, and
efficiency = decode-only speedup / ideal speedup, the ideal from bare forward costs timed outside the loop
(metric version 3, `verifier.metrics`). Goals: efficiency >= 0.9 and tok/s >= 1.3x transformers.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# The script's own folder goes: its `verifier.py` would shadow the package (and other scripts there, stdlib modules).
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from verifier.engines.pytorch import run_pair  # noqa: E402
from registry.domain.measurement import DEFAULT_REPEATS, RunSettings  # noqa: E402
from registry.domain.run import Run  # noqa: E402
from verifier.loading import load_causal_lm, load_target, resolve_device  # noqa: E402
from verifier.methods.dflash.muse_glimmer import muse_glimmer_assistant  # noqa: E402
from verifier.prompts import bundled_sets, encode_prompt  # noqa: E402
from verifier.build_cache import cached_build  # noqa: E402
from verifier.tiny import dflash as tiny_dflash  # noqa: E402
from verifier.tiny import qwen3 as tiny_qwen3  # noqa: E402

EFFICIENCY_GOAL = 0.9
SPEED_RATIO_GOAL = 1.3
DEFAULT_CACHE = REPO_ROOT / ".cache" / "test-models"

SMALL_TARGET = tiny_qwen3.Geometry(
    hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
    head_dim=32,
)
SMALL_DRAFT_LM = tiny_qwen3.Geometry(
    hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    head_dim=32,
)
SMALL_TRAINING = tiny_qwen3.Training(steps=400, learning_rate=2e-3)
# z-lab's default spacing for 8 target layers and 2 fused layers ([1, 5]) plus the last layer.
SMALL_DFLASH = tiny_dflash.DrafterShape(num_hidden_layers=2, block_size=8, target_layer_ids=(1, 5, 7))


@dataclass(frozen=True)
class Pair:
    target: Path
    draft_lm: Path
    dflash: Path


@dataclass(frozen=True)
class Row:
    method: str  # "baseline", "draft-lm", "dflash"
    ours_tokens_per_s: float  # median over cycles
    ours_range: tuple[float, float]  # min, max over cycles
    theirs_tokens_per_s: float | None  # None: transformers could not run it
    ratio: float | None  # median over cycles of ours / theirs measured back to back
    ratio_range: tuple[float, float] | None
    same_output: bool | None  # transformers' greedy tokens equal ours on every prompt
    tau: float | None
    tau_emitted: float | None  # tokens actually emitted per verify pass (τ less what the end of a text cuts)
    speedup: float | None  # ours, against our own interleaved baseline (prefill included)
    speedup_range: tuple[float, float] | None
    decode_speedup: float | None  # the same without the first token (TTFT)
    ideal_speedup: float | None  # τ_emitted · T(1) / (T(γ+1) + T_draft), bare forward costs
    efficiency: float | None  # decode_speedup / ideal_speedup, as the engine reports it
    theirs_error: str | None = None


def build_pair(size: str, cache_root: Path) -> Pair:
    if size == "tiny":
        target = tiny_qwen3.cached_target(cache_root)
        return Pair(
            target=target,
            draft_lm=tiny_qwen3.cached_draft_lm(cache_root, target, trained=True),
            dflash=tiny_dflash.cached_dflash_drafter(cache_root, target, trained=True),
        )
    target = cached_build(
        cache_root,
        "small-qwen3-target",
        lambda out: tiny_qwen3.build_target(out, SMALL_TRAINING, SMALL_TARGET),
        source_files=tiny_qwen3.SOURCE_FILES,
        settings=tiny_qwen3.build_settings(SMALL_TARGET, SMALL_TRAINING),
    )
    draft_training = tiny_qwen3.Training(steps=400, learning_rate=2e-3, seed=1)
    draft_lm = cached_build(
        cache_root,
        "small-qwen3-draft-lm",
        lambda out: tiny_qwen3.build_draft_lm(target, out, True, draft_training, SMALL_DRAFT_LM),
        source_files=tiny_qwen3.SOURCE_FILES,
        settings={**tiny_qwen3.build_settings(SMALL_DRAFT_LM, draft_training), "target": target.name},
    )
    dflash_training = tiny_dflash.DrafterTraining()
    dflash = cached_build(
        cache_root,
        "small-dflash",
        lambda out: tiny_dflash.build_dflash_drafter(target, out, True, SMALL_DFLASH, dflash_training),
        source_files=tiny_dflash.SOURCE_FILES,
        settings={**tiny_dflash.build_settings(SMALL_DFLASH, dflash_training, True), "target": target.name},
    )
    return Pair(target=target, draft_lm=draft_lm, dflash=dflash)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_pass(
    generate: Callable[[torch.Tensor], torch.Tensor], prompts: list[torch.Tensor], device: torch.device
) -> tuple[float, list[list[int]]]:
    """Pooled tok/s over one pass of every prompt (prefill included, as in our engine) and the generated tokens."""
    tokens, seconds, outputs = 0, 0.0, []
    for prompt in prompts:
        _synchronize(device)
        started = time.perf_counter()
        output = generate(prompt)
        _synchronize(device)
        seconds += time.perf_counter() - started
        generated = output[0, prompt.shape[-1] :].tolist()
        tokens += len(generated)
        outputs.append(generated)
    return tokens / seconds, outputs


Generate = Callable[[torch.Tensor], torch.Tensor]


def transformers_generators(
    pair: Pair, settings: RunSettings, draft_length: int
) -> tuple[list[torch.Tensor], dict[str, Generate | str]]:
    """The encoded prompts and one generate function per method (an error message where it cannot be set up)."""
    target = load_target(pair.target, device=settings.device, dtype=settings.dtype)
    model, device = target.model, target.device
    dtype = next(model.parameters()).dtype
    prompts = [
        torch.tensor([encode_prompt(p, target.tokenizer)], device=device) for s in bundled_sets() for p in s.prompts
    ]
    common: dict[str, Any] = {"max_new_tokens": settings.max_new_tokens, "do_sample": False}
    generators: dict[str, Generate | str] = {"baseline": lambda ids: model.generate(ids, **common)}
    draft_lm = load_causal_lm(pair.draft_lm, device=device, dtype=dtype)
    # Draft exactly as many tokens per round as our draft-lm proposer does.
    draft_lm.generation_config.num_assistant_tokens = draft_length
    draft_lm.generation_config.num_assistant_tokens_schedule = "constant"
    draft_lm.generation_config.assistant_confidence_threshold = 0.0
    generators["draft-lm"] = lambda ids: model.generate(ids, assistant_model=draft_lm, **common)
    try:
        assistant = muse_glimmer_assistant(pair.dflash, model.config.num_hidden_layers, device=device, dtype=dtype)
        generators["dflash"] = lambda ids: model.generate(
            ids, assistant_model=assistant, speculation_type="dflash", **common
        )
    except Exception as error:  # noqa: BLE001 - reported in the table, the other rows still run
        generators["dflash"] = f"{type(error).__name__}: {error}"
    return prompts, generators


def _ordered_generations(run: Run) -> list[list[int]]:
    return [run.generations[f"{s.name}/{i}"] for s in bundled_sets() for i in range(len(s.prompts))]


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def measure(pair: Pair, settings: RunSettings, cycles: int) -> list[Row]:
    """`cycles` rounds of [our draft-lm, our dflash, transformers' three]; medians over cycles.

    Measuring ours and theirs back to back in every cycle keeps the ratios honest when the machine's load drifts.
    """
    sets = bundled_sets()
    drafters = {"draft-lm": pair.draft_lm, "dflash": pair.dflash}
    ours: dict[str, list[Run]] = {method: [] for method in drafters}
    theirs: dict[str, list[float]] = {"baseline": [], **{method: [] for method in drafters}}
    theirs_outputs: dict[str, list[list[int]]] = {}
    errors: dict[str, str] = {}
    prompts: list[torch.Tensor] = []
    generators: dict[str, Generate | str] = {}
    device = resolve_device(settings.device)
    with torch.inference_mode():
        for cycle in range(cycles):
            for method, drafter in drafters.items():
                ours[method].append(run_pair(pair.target, drafter, sets, settings))
            if not generators:
                prompts, generators = transformers_generators(pair, settings, ours["draft-lm"][0].draft_length)
            for method, generate in generators.items():
                if isinstance(generate, str) or method in errors:
                    errors.setdefault(method, str(generate))
                    continue
                try:
                    if cycle == 0:
                        generate(prompts[0])  # warm-up, as run_pair does for ours
                    rate, theirs_outputs[method] = time_pass(generate, prompts, device)
                except Exception as error:  # noqa: BLE001 - reported in the table, the other rows still run
                    errors[method] = f"{type(error).__name__}: {error}"
                    continue
                theirs[method].append(rate)

    def row(method: str, our_rates: list[float], runs: list[Run] | None) -> Row:
        their_rates = theirs[method]
        ratios = [o / t for o, t in zip(our_rates, their_rates)] if method not in errors else []
        # Our runs are greedy and lossless-checked, so their outputs are also our baseline's.
        our_outputs = _ordered_generations((runs or ours["dflash"])[-1])
        same = theirs_outputs[method] == our_outputs if method in theirs_outputs and method not in errors else None
        values: dict[str, Any] = dict.fromkeys(
            ("tau", "tau_emitted", "speedup", "speedup_range", "decode_speedup", "ideal_speedup", "efficiency")
        )
        if runs:
            overalls = [r.overall for r in runs]
            speedups = [o.speedup.median for o in overalls if o.speedup]
            values["tau"] = _median([o.acceptance.tau if o.acceptance else None for o in overalls])
            values["tau_emitted"] = _median([o.tau_emitted for o in overalls])
            values["speedup"] = _median(list(speedups))
            values["speedup_range"] = (min(speedups), max(speedups)) if speedups else None
            values["decode_speedup"] = _median([o.decode_speedup.median if o.decode_speedup else None
                                                for o in overalls])
            values["ideal_speedup"] = _median([o.ideal_speedup for o in overalls])
            values["efficiency"] = _median([o.efficiency for o in overalls])
        return Row(
            method=method,
            ours_tokens_per_s=statistics.median(our_rates),
            ours_range=(min(our_rates), max(our_rates)),
            theirs_tokens_per_s=_median(list(their_rates)) if method not in errors else None,
            ratio=_median(list(ratios)),
            ratio_range=(min(ratios), max(ratios)) if ratios else None,
            same_output=same,
            theirs_error=errors.get(method),
            **values,
        )

    baseline_rates = [
        statistics.median(r.overall.baseline_tokens_per_s.median for r in cycle_runs)
        for cycle_runs in zip(*ours.values())
    ]
    rows = [row("baseline", baseline_rates, None)]
    for method, runs in ours.items():
        rows.append(row(method, [r.overall.tokens_per_s.median for r in runs if r.overall.tokens_per_s], runs))
    return rows


def _fmt(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def _range(bounds: tuple[float, float] | None, digits: int = 2) -> str:
    return "—" if bounds is None else f"{bounds[0]:.{digits}f}–{bounds[1]:.{digits}f}"


def render(rows: list[Row], context: dict[str, Any]) -> None:
    table = Table(title=f"verifier vs transformers — {context['size']} pair on {context['device']}: "
                        f"{context['measures']}")
    for column in ("method", "ours tok/s (min–max)", "HF tok/s", "ours/HF (min–max)", "same out", "τ", "τ emitted",
                   "speedup (min–max)", "decode speedup", "ideal", "eff."):  # fmt: skip
        table.add_column(column, justify="left" if column == "method" else "right")
    for row in rows:
        same = "—" if row.same_output is None else ("yes" if row.same_output else "NO")
        table.add_row(
            row.method,
            f"{_fmt(row.ours_tokens_per_s, 1)} ({_range(row.ours_range, 1)})",
            _fmt(row.theirs_tokens_per_s, 1) if row.theirs_error is None else "failed",
            f"{_fmt(row.ratio, 2, 'x')} ({_range(row.ratio_range)})",
            same,
            _fmt(row.tau),
            _fmt(row.tau_emitted),
            f"{_fmt(row.speedup, 2, 'x')} ({_range(row.speedup_range)})",
            _fmt(row.decode_speedup, 2, "x"),
            _fmt(row.ideal_speedup, 2, "x"),
            _fmt(row.efficiency),
        )
    console = Console(width=max(Console().width, 130))
    console.print(table)
    for row in rows:
        if row.theirs_error:
            console.print(f"transformers {row.method} failed: {row.theirs_error}")
    dflash = next(r for r in rows if r.method == "dflash")
    # Efficiency is a GPU goal: on a CPU the bare forwards are so cheap that it measures the loop's overhead.
    goals = [
        *([("dflash efficiency", dflash.efficiency, EFFICIENCY_GOAL)] if "GPU" in context["measures"] else []),
        *((f"{r.method} tok/s ours/transformers", r.ratio, SPEED_RATIO_GOAL) for r in rows if r.method != "baseline"),
    ]
    for name, value, goal in goals:
        verdict = "—" if value is None else ("met" if value >= goal else "not met")
        console.print(f"goal {name} >= {goal}: {_fmt(value)} ({verdict})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda[:n]")
    parser.add_argument("--size", choices=("tiny", "small"), default="tiny")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                        help="measurement cycles (ours and theirs back to back)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is steadiest on shared cores)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where built models are kept")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--build-only", action="store_true",
                        help="build (or reuse) the models in --cache and stop: to carry them to a GPU machine")
    args = parser.parse_args(argv)
    if args.max_new_tokens < 1 or args.repeats < 1 or args.threads < 1:
        parser.error("--max-new-tokens, --repeats and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    # Building trains on the CPU (minutes for the small size on one thread), before any GPU work: say so, or a
    # GPU lease runs out looking idle.
    Console(stderr=True).print(f"models: building or reusing the {args.size} pair in {args.cache} "
                               f"(trained on the CPU, {args.threads} thread(s))")
    pair = build_pair(args.size, args.cache)
    if args.build_only:
        print(pair.target, pair.draft_lm, pair.dflash, sep="\n")
        return 0
    settings = RunSettings(max_new_tokens=args.max_new_tokens, repeats=1, warmup=1, device=str(device))
    rows = measure(pair, settings, args.repeats)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"
    context = {
        "measures": "loop overhead against generate(assistant_model=...)" if device.type == "cpu"
        else "speculative decoding on a GPU",
        "size": args.size,
        "device": device_name,
        "threads": args.threads,
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "prompts": sum(len(s.prompts) for s in bundled_sets()),
        "torch": torch.__version__,
    }
    render(rows, context)
    if args.json:
        payload = {"context": context, "rows": [asdict(r) for r in rows],
                   "goals": {"efficiency": EFFICIENCY_GOAL, "tokens_per_s_ratio": SPEED_RATIO_GOAL}}  # fmt: skip
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
