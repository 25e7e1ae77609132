"""The GPU check: one prepared run that says whether the verifier's numbers hold on a CUDA machine, as one JSON.

    python bench/gpu_check.py --out gpu_check.json            # on the GPU machine
    python bench/gpu_check.py --dry-run --out dry.json        # on a CPU (the test suite runs this)

Steps, each recorded with what it found; the first failing environment check stops the run with its reason:
1. environment: torch with CUDA, transformers and huggingface-hub at the versions constraints.txt pins (a GPU
   image's preinstalled transformers is older than the rollback needs: install the carried wheels first);
2. tiny pairs (the Qwen3 target with its draft LM and its DFlash drafter, built by `verifier.tiny`) in float32,
   which must be lossless with no tie, and in bfloat16, which must be lossless up to ties (`docs/metrics.md`);
3. hybrid rollback: the tiny Qwen3-Next (Gated DeltaNet) target with a rejecting draft on the device, greedy output
   equal to the baseline's and one target pass per round (no second pass after a rejection);
4. T > 0: the first round's every position against the target's exact probabilities
   (`tests/verifier/test_first_round.py`), draft LM at T = 1;
5. a random model of real size built on the device (Qwen3-1.7B's geometry, bfloat16, random weights: no download):
   peak memory ≥ its weights, T(1) ≥ weight bytes ÷ the card's HBM bandwidth (the GPU catalog), and the ceiling of
   speculative decoding with an always-right oracle drafter (it proposes the target's own greedy continuation):
   speedup median with its min-max over repeats.

Every GPU number is eager transformers (batch 1, no CUDA graphs, no fused kernels), not a serving engine: a
serving engine's speedups differ. `--dry-run` runs the same steps on a CPU with a small geometry and few samples.

What travels to a machine without internet (under 64 MiB): the tiny models' cache folder
(`$DRAFTERS_TEST_CACHE`, built here by `python bench/gpu_check.py --dry-run`) and wheels of the pinned
transformers / huggingface-hub when the image lacks them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
# The script's folder must not shadow packages (bench/verifier.py would shadow `verifier`).
sys.path[:] = [str(REPO_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import torch  # noqa: E402

from registry.domain.gpus import find_gpu, load_gpus  # noqa: E402
from registry.domain.measurement import RunSettings  # noqa: E402
from verifier.decode import TESTED_TRANSFORMERS, decode, synchronize, transformers_problem  # noqa: E402
from verifier.engines.pytorch import run_pair  # noqa: E402
from verifier.loading import load_causal_lm, load_target  # noqa: E402
from verifier.methods.draft_lm import DraftLMProposer  # noqa: E402
from verifier.prompts import bundled_set  # noqa: E402
from verifier.proposer import NoDraft, Proposal, TargetOutput  # noqa: E402
from verifier.tiny.dflash import cached_dflash_drafter  # noqa: E402
from verifier.tiny.qwen3 import cached_draft_lm, cached_target  # noqa: E402

SCHEMA_VERSION = 1
# Qwen/Qwen3-1.7B's published geometry (its config.json): the random model of real size.
QWEN3_1_7B = {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128}
DRY_GEOMETRY = {"vocab_size": 4096, "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64}


class CheckFailed(RuntimeError):
    """A step found what the verifier's numbers cannot hold with; the JSON says which and why."""


def pinned(name: str) -> str | None:
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line.lower().replace("_", "-").startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    return None


def environment(device: torch.device) -> dict[str, Any]:
    """Versions against the pins; raises CheckFailed with the reason on a mismatch."""
    found: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                             "cuda_available": torch.cuda.is_available(), "device": str(device)}
    for package in ("transformers", "huggingface-hub"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
        found[f"{package}_pinned"] = pinned(package)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise CheckFailed(f"CUDA asked for, but torch {torch.__version__} sees no GPU")
        found["gpu"] = torch.cuda.get_device_name(device)
        found["cuda"] = torch.version.cuda
    problem = transformers_problem()
    if problem is not None:
        raise CheckFailed(problem)
    if found["transformers"] != TESTED_TRANSFORMERS:
        raise CheckFailed(f"transformers {found['transformers']} is not the tested {TESTED_TRANSFORMERS}")
    if found["huggingface-hub_pinned"] and found["huggingface-hub"] != found["huggingface-hub_pinned"]:
        raise CheckFailed(f"huggingface-hub {found['huggingface-hub']} is not the pinned "
                          f"{found['huggingface-hub_pinned']}")
    return found


def tiny_pairs(cache: Path, device: str, max_new_tokens: int, prompts_per_set: int | None) -> list[dict[str, Any]]:
    target = cached_target(cache)
    drafters = {"draft-lm": cached_draft_lm(cache, target, trained=True),
                "dflash": cached_dflash_drafter(cache, target, trained=True)}
    prompts = [replace(found, prompts=found.prompts[:prompts_per_set])
               for found in (bundled_set(name) for name in ("chat", "code"))]
    rows = []
    for dtype in ("float32", "bfloat16"):
        settings = RunSettings(max_new_tokens=max_new_tokens, repeats=1, warmup=1, device=device, dtype=dtype,
                               cost_repeats=3)
        for method, drafter in drafters.items():
            run = run_pair(target, drafter, prompts, settings)
            divergence = run.first_divergence
            rows.append({"method": method, "dtype": dtype, "lossless": run.lossless, "ties": run.ties,
                         "first_divergence": None if divergence is None else {
                             "verdict": divergence.verdict, "margin": divergence.target_logit_margin,
                             "float32_gap": divergence.float32_gap, "tolerance": divergence.tie_tolerance},
                         "tau": run.tau, "speedup": run.speedup, "decode_speedup": run.decode_speedup,
                         "peak_memory_bytes": run.peak_memory_bytes, "peak_memory_kind": run.peak_memory_kind})
            if run.lossless is not True or (dtype == "float32" and run.ties):
                raise CheckFailed(f"{method} in {dtype} is not lossless: {rows[-1]}")
    return rows


class _Rejecting:
    """A draft LM whose last draft of every round is replaced by another token: every round rolls back."""

    def __init__(self, inner: DraftLMProposer) -> None:
        self.inner = inner
        self.draft_length, self.needs_hidden_states = inner.draft_length, inner.needs_hidden_states

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.inner.begin(prompt_ids, target_out)

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        tokens = self.inner.propose(temperature, generator).tokens.clone()
        tokens[-1] = (tokens[-1] + 1) % 50
        return Proposal(tokens=tokens)

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self.inner.observe(n_accepted, committed_tokens, target_out)


@torch.inference_mode()
def hybrid_rollback(cache: Path, device: torch.device, new_tokens: int) -> dict[str, Any]:
    from tests.tiny_architectures import cached_architecture  # the tiny architectures live with the tests

    folder = cached_architecture(cache, "qwen3_next")
    model = load_causal_lm(folder, device=device, dtype=torch.float32)
    draft = load_causal_lm(folder, device=device, dtype=torch.float32)  # its own copy: only the target is counted
    vocab = model.config.get_text_config().vocab_size
    prompt = torch.randint(5, min(vocab, 900), (12,), generator=torch.Generator().manual_seed(3)).to(device)
    settings = {"max_new_tokens": new_tokens, "temperature": 0.0, "eos_token_ids": frozenset()}
    baseline = decode(model, NoDraft(), prompt, generator=torch.Generator(device=device).manual_seed(0), **settings)
    passes: list[int] = []
    hook = model.register_forward_pre_hook(lambda module, args, kwargs: passes.append(1), with_kwargs=True)
    try:
        proposer = _Rejecting(DraftLMProposer(draft, draft_length=3, target_vocab=vocab))
        result = decode(model, proposer, prompt, generator=torch.Generator(device=device).manual_seed(0),
                        **settings)
    finally:
        hook.remove()
    found = {"equal_to_baseline": result.tokens == baseline.tokens, "rounds": len(result.rounds),
             "partial_accepts": sum(1 for r in result.rounds if 0 < r.accepted < r.drafted),
             "target_passes": len(passes), "one_pass_per_round": len(passes) == 1 + len(result.rounds)}
    if not found["equal_to_baseline"] or not found["one_pass_per_round"] or not found["partial_accepts"]:
        raise CheckFailed(f"hybrid rollback on {device} is not exact in one pass per round: {found}")
    return found


def sampling(cache: Path, samples: int, *, require_power: bool) -> dict[str, Any]:
    """`require_power`: fail unless some position was tested (a dry run's few samples may test none)."""
    from tests.verifier.test_first_round import ALPHA, QWEN3_PROMPTS, first_rounds, position_p_values

    target_dir = cached_target(cache)
    target = load_target(target_dir, device="cpu")
    proposer = DraftLMProposer(load_causal_lm(cached_draft_lm(cache, target_dir), device=torch.device("cpu"),
                                              dtype=torch.float32), draft_length=2,
                               target_vocab=target.model.config.vocab_size)
    p_values = position_p_values(target, QWEN3_PROMPTS, first_rounds(target, proposer, QWEN3_PROMPTS, 1.0, samples),
                                 1.0)
    found = {"temperature": 1.0, "samples": samples, "p_values": p_values, "alpha": ALPHA}
    if (require_power and not p_values) or min(p_values.values(), default=1.0) <= ALPHA:
        raise CheckFailed(f"T>0 sampling is not the target's: {found}")
    return found


class _Oracle:
    """Always right: proposes the next tokens of the target's own greedy output (known from the baseline)."""

    needs_hidden_states = False

    def __init__(self, continuation: list[int], draft_length: int) -> None:
        self.continuation, self.draft_length, self.done = continuation, draft_length, 1

    def begin(self, prompt_ids: torch.Tensor, target_out: TargetOutput) -> None:
        self.done = 1  # the prefill's token

    def propose(self, temperature: float, generator: torch.Generator) -> Proposal:
        return Proposal(tokens=torch.tensor(self.continuation[self.done: self.done + self.draft_length],
                                            dtype=torch.long))

    def observe(self, n_accepted: int, committed_tokens: torch.Tensor, target_out: TargetOutput) -> None:
        self.done += int(committed_tokens.shape[0])


@torch.inference_mode()
def real_size(device: torch.device, geometry: dict[str, int], dtype: torch.dtype, new_tokens: int,
              repeats: int, draft_length: int) -> dict[str, Any]:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(**geometry, tie_word_embeddings=True, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0})
    with torch.device(device):
        model = Qwen3ForCausalLM(config).to(dtype).eval()
    if device.type == "cuda":  # the run's peak: the weights it holds and what decoding adds, not the build
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    prompt = torch.randint(0, geometry["vocab_size"], (64,), generator=torch.Generator().manual_seed(0)).to(device)
    common = {"max_new_tokens": new_tokens, "temperature": 0.0, "eos_token_ids": frozenset()}
    generator = torch.Generator(device=device).manual_seed(0)
    baseline = decode(model, NoDraft(), prompt, generator=generator, **common)
    oracle = _Oracle(baseline.tokens, draft_length)
    speedups, base_s, oracle_s = [], [], []
    for _ in range(repeats):
        plain = decode(model, NoDraft(), prompt, generator=generator, **common)
        fast = decode(model, oracle, prompt, generator=generator, **common)
        if fast.tokens != plain.tokens:
            raise CheckFailed("the oracle drafter changed the greedy output")
        base_s.append(plain.total_seconds)
        oracle_s.append(fast.total_seconds)
        speedups.append(plain.total_seconds / fast.total_seconds)
    # T(1): one target step on the pending token at the prompt's context, the fastest of several.
    steps = []
    for _ in range(10):
        synchronize(device)
        started = time.perf_counter()
        model(input_ids=prompt[None, :1])
        synchronize(device)
        steps.append(time.perf_counter() - started)
    peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
    gpu = find_gpu(load_gpus(), torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    floor = weights / (gpu.bandwidth_gb_s * 1e9) if gpu is not None else None
    found = {"geometry": geometry, "dtype": str(dtype).removeprefix("torch."), "weight_bytes": weights,
             "peak_memory_bytes": peak, "t1_s": min(steps), "t1_floor_s": floor,
             "gpu_catalog_entry": gpu.name if gpu is not None else None,
             "oracle_draft_length": draft_length, "new_tokens": new_tokens,
             "oracle_speedup": {"median": statistics.median(speedups), "min": min(speedups), "max": max(speedups),
                                "n": len(speedups)},
             "baseline_s_median": statistics.median(base_s), "oracle_s_median": statistics.median(oracle_s),
             "engine": "eager transformers (batch 1), not a serving engine"}
    if peak is not None and peak < weights:
        raise CheckFailed(f"peak memory {peak} is below the weights {weights}: it does not count what is held")
    if floor is not None and min(steps) < floor:
        raise CheckFailed(f"T(1) {min(steps):.6f}s is below weights ÷ bandwidth {floor:.6f}s: the timing is wrong")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="a CPU with a small geometry and few samples")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("DRAFTERS_TEST_CACHE", REPO_ROOT / ".cache" / "test-models")))
    args = parser.parse_args(argv)
    device = torch.device("cpu" if args.dry_run else "cuda")
    report: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "dry_run": args.dry_run, "steps": {},
                              "note": "every GPU figure is eager transformers (batch 1), not a serving engine"}
    steps = [
        ("environment", lambda: environment(device)),
        ("tiny_pairs", lambda: tiny_pairs(args.cache, str(device), 12 if args.dry_run else 256,
                                          1 if args.dry_run else None)),
        ("hybrid_rollback", lambda: hybrid_rollback(args.cache, device, 12 if args.dry_run else 64)),
        ("sampling", lambda: sampling(args.cache, 40 if args.dry_run else 3000, require_power=not args.dry_run)),
        ("real_size", lambda: real_size(device, DRY_GEOMETRY if args.dry_run else QWEN3_1_7B,
                                        torch.float32 if args.dry_run else torch.bfloat16,
                                        8 if args.dry_run else 256, 2 if args.dry_run else 5, 4)),
    ]
    status = 0
    for name, step in steps:
        started = time.perf_counter()
        try:
            report["steps"][name] = {"ok": True, "found": step()}
        except CheckFailed as failure:
            report["steps"][name] = {"ok": False, "reason": str(failure)}
            status = 1
        report["steps"][name]["seconds"] = round(time.perf_counter() - started, 2)
        if status and name == "environment":
            break  # nothing else can be trusted on a mismatched environment
    report["ok"] = status == 0
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(json.dumps({name: step["ok"] for name, step in report["steps"].items()}))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
