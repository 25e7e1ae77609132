"""The same tiny pairs and prompts in the PyTorch engine and in llama.cpp (llama-server), in one run.

    .venv/bin/python bench/engines.py [--repeats N] [--max-new-tokens N] [--threads N] [--sets a,b] [--json OUT]

Builds (or reuses from the model cache) the tiny Qwen3 target, its trained draft LM and a trained DFlash drafter
whose fused layers llama.cpp can read (target layers 0 and 2), then measures greedy decoding of the bundled prompts
with `verifier.engines.pytorch.run_pair` and `verifier.engines.llamacpp.engine.run_llamacpp_pair`, one harness
(`verifier.harness.run`): each engine against its own baseline, the target alone in the same engine, asked prompt
by prompt between the pair's requests, five repeats by default with the speedup's min-max over them. The table puts τ, baseline tok/s, tok/s and speedup side by side, says
whether each engine's output was lossless, and whether the two engines' greedy outputs agree token for token.
Needs the llamacpp extra.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# The script's own folder goes: its `verifier.py` would shadow the package.
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402

from registry.domain.measurement import DEFAULT_REPEATS, RunSettings  # noqa: E402
from registry.domain.run import Run  # noqa: E402
from verifier.engines.pytorch import run_pair  # noqa: E402
from verifier.engines.llamacpp.engine import run_llamacpp_pair  # noqa: E402
from verifier.engines.llamacpp.install import find_server  # noqa: E402
from verifier.engines.llamacpp.server import LlamaCppOptions  # noqa: E402
from verifier.prompts import BUNDLED_SET_NAMES, bundled_set  # noqa: E402
from verifier.build_cache import cached_build  # noqa: E402
from verifier.tiny import dflash as tiny_dflash  # noqa: E402
from verifier.tiny import qwen3 as tiny_qwen3  # noqa: E402

DEFAULT_CACHE = REPO_ROOT / ".cache" / "test-models"
# llama.cpp fuses a target layer as the input of the next one: the last layer (3 of 4) has none.
LLAMACPP_DFLASH = tiny_dflash.DrafterShape(target_layer_ids=(0, 2))


def build_pairs(cache_root: Path) -> tuple[Path, dict[str, Path]]:
    target = tiny_qwen3.cached_target(cache_root)
    dflash = cached_build(
        cache_root,
        "tiny-dflash-layers02-trained",
        lambda out: tiny_dflash.build_dflash_drafter(target, out, trained=True, shape=LLAMACPP_DFLASH),
        source_files=tiny_dflash.SOURCE_FILES,
        settings={**tiny_dflash.build_settings(LLAMACPP_DFLASH, tiny_dflash.DrafterTraining(), True),
                  "target": target.name},
    )
    return target, {"draft-lm": tiny_qwen3.cached_draft_lm(cache_root, target, trained=True), "dflash": dflash}


def row(engine: str, method: str, run: Run, seconds: float) -> dict[str, Any]:
    overall = run.overall
    return {
        "engine": engine,
        "method": method,
        "tau": overall.acceptance.tau if overall.acceptance else None,
        "acceptance_rate": overall.acceptance.acceptance_rate if overall.acceptance else None,
        "baseline_tokens_per_s": overall.baseline_tokens_per_s.median,
        "tokens_per_s": overall.tokens_per_s.median if overall.tokens_per_s else None,
        "speedup": overall.speedup.median if overall.speedup else None,
        "speedup_min": overall.speedup.minimum if overall.speedup else None,
        "speedup_max": overall.speedup.maximum if overall.speedup else None,
        "tau_emitted": overall.tau_emitted,
        "efficiency": overall.efficiency,  # None in llama.cpp: llama-server times no single forward
        "lossless": run.lossless,
        "seconds": seconds,
    }


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(rows: list[dict[str, Any]], agreement: dict[str, bool], context: dict[str, Any]) -> None:
    print(f"engines on {context['machine']} ({context['threads']} thread(s)), {context['prompts']} prompts, "
          f"{context['max_new_tokens']} new tokens, {context['repeats']} repeat(s), greedy")
    header = f"{'method':<9} {'engine':<17} {'τ':>5} {'τ emit':>6} {'accept':>7} {'base tok/s':>11} {'tok/s':>9} " \
             f"{'speedup (min-max)':>19} {'eff.':>5} {'lossless':>9}"
    print(header)
    print("-" * len(header))
    for r in rows:
        spread = f"{_fmt(r['speedup'])} ({_fmt(r['speedup_min'])}-{_fmt(r['speedup_max'])})"
        print(f"{r['method']:<9} {r['engine']:<17} {_fmt(r['tau']):>5} {_fmt(r['tau_emitted']):>6} "
              f"{_fmt(r['acceptance_rate']):>7} {_fmt(r['baseline_tokens_per_s'], 1):>11} "
              f"{_fmt(r['tokens_per_s'], 1):>9} {spread:>19} {_fmt(r['efficiency']):>5} {str(r['lossless']):>9}")
    for method, same in agreement.items():
        print(f"{method}: PyTorch and llama.cpp greedy outputs {'agree on every prompt' if same else 'differ'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sets", default=",".join(BUNDLED_SET_NAMES))
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    binary = find_server()
    target, drafters = build_pairs(args.cache)
    prompt_sets = [bundled_set(name.strip()) for name in args.sets.split(",") if name.strip()]
    settings = RunSettings(max_new_tokens=args.max_new_tokens, repeats=args.repeats, device="cpu")
    options = LlamaCppOptions(threads=args.threads, gguf_cache=args.cache / "gguf")
    rows, agreement = [], {}
    for method, drafter in drafters.items():
        started = time.perf_counter()
        ours = run_pair(target, drafter, prompt_sets, settings)
        rows.append(row("pytorch", method, ours, time.perf_counter() - started))
        started = time.perf_counter()
        theirs = run_llamacpp_pair(target, drafter, prompt_sets, settings, options=options)
        rows.append(row(f"llama.cpp b{binary.build}", method, theirs, time.perf_counter() - started))
        agreement[method] = ours.generations == theirs.generations
    context = {"machine": f"{platform.machine()} {platform.system()}", "threads": args.threads,
               "prompts": sum(len(s.prompts) for s in prompt_sets), "max_new_tokens": args.max_new_tokens,
               "repeats": args.repeats, "llama_cpp_build": binary.build, "torch": torch.__version__}
    render(rows, agreement, context)
    if args.json is not None:
        args.json.write_text(json.dumps({"context": context, "rows": rows, "outputs_agree": agreement}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
