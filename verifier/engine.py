"""Runs a (target, drafter) pair against its baseline over prompt sets and returns a `PairRun`.

Baseline and speculative decoding share one loop (`verifier.decode`) and one token accounting; they alternate
prompt by prompt inside each repeat so drift in machine load hits both alike.
"""

from __future__ import annotations

import hashlib
import platform
import resource
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from verifier.decode import DecodeResult, decode
from verifier.loading import DTYPES, LoadedTarget, files_digest, load_target, read_config, weight_bytes
from verifier.metrics import Acceptance, Spread, Throughput, acceptance, ideal_speedup, speedup, spread, throughput
from verifier.prompts import PromptSet, encode_prompt
from verifier.proposer import NoDraft, Proposer

TOKENIZER_FILE_NAMES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json")

# progress(done, total, label) after each decode of a measured repeat.
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class RunSettings:
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    repeats: int = 3
    warmup: int = 1
    device: str = "auto"  # "auto" = cuda when available, else cpu
    dtype: str = "float32"
    draft_length: int | None = None  # None = the method's default (DFlash: block_size - 1)
    method: str | None = None  # override the method detected from the drafter's config
    enable_thinking: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.max_new_tokens < 1:
            problems.append("max_new_tokens must be at least 1")
        if self.temperature < 0:
            problems.append("temperature must be >= 0")
        if self.repeats < 1:
            problems.append("repeats must be at least 1")
        if self.warmup < 0:
            problems.append("warmup must be >= 0")
        if self.draft_length is not None and self.draft_length < 1:
            problems.append("draft_length must be at least 1 (or unset for the method's default)")
        if self.dtype not in DTYPES:
            problems.append(f"dtype must be one of {', '.join(DTYPES)}")
        if problems:
            raise ValueError("invalid run settings: " + "; ".join(problems))


class IncompatiblePair(ValueError):
    """The drafter cannot run on this target; `reasons` says why."""

    def __init__(self, reasons: Sequence[str]) -> None:
        self.reasons = tuple(reasons)
        super().__init__("drafter and target are incompatible: " + "; ".join(self.reasons))


@dataclass(frozen=True)
class Divergence:
    """First token where the speculative output left the baseline's in a greedy run."""

    prompt_set: str
    prompt_index: int
    repeat: int
    position: int
    baseline_token: int | None  # None: the baseline output ended here
    speculative_token: int | None


@dataclass(frozen=True)
class SetResult:
    name: str
    prompts: int
    digest: str
    baseline: Throughput  # pooled over repeats
    baseline_tokens_per_s: Spread  # over repeats
    speculative: Throughput | None = None
    tokens_per_s: Spread | None = None
    speedup: Spread | None = None
    acceptance: Acceptance | None = None  # pooled over repeats
    ideal_speedup: float | None = None
    efficiency: float | None = None  # median realized speedup ÷ ideal speedup
    lossless: bool | None = None  # greedy runs only


@dataclass
class PairRun:
    method: str | None  # None: baseline only
    overall: SetResult
    per_set: list[SetResult]
    lossless: bool | None
    first_divergence: Divergence | None
    peak_memory_bytes: int
    peak_memory_kind: str  # "cuda_max_memory_allocated" or "process_rss_peak" (whole process lifetime)
    target_weight_bytes: int
    drafter_weight_bytes: int | None
    provenance: dict[str, Any]
    settings: RunSettings
    draft_length: int = 0
    # "set/index" → generated token ids of the last repeat (speculative when there is a drafter).
    generations: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        overall = self.overall
        acc = overall.acceptance
        return {
            "method": self.method,
            "lossless": self.lossless,
            "first_divergence": asdict(self.first_divergence) if self.first_divergence else None,
            "tau": acc.tau if acc else None,
            "acceptance_rate": acc.acceptance_rate if acc else None,
            "per_position_acceptance": (
                {"marginal": list(acc.marginal), "conditional": list(acc.conditional)} if acc else None
            ),
            "acceptance_histogram": list(acc.histogram) if acc else None,
            "identity_check": (
                {"uniform_draft_length": acc.uniform_draft_length, "gap": acc.identity_gap} if acc else None
            ),
            "baseline_tokens_per_s": overall.baseline_tokens_per_s.median,
            "tokens_per_s": overall.tokens_per_s.median if overall.tokens_per_s else None,
            "speedup": overall.speedup.median if overall.speedup else None,
            "ideal_speedup": overall.ideal_speedup,
            "efficiency": overall.efficiency,
            "ttft_s": (overall.speculative or overall.baseline).ttft_s,
            "tpot_s": (overall.speculative or overall.baseline).tpot_s,
            "draft_time_share": overall.speculative.draft_time_share if overall.speculative else None,
            "peak_memory_bytes": self.peak_memory_bytes,
            "peak_memory_kind": self.peak_memory_kind,
            "target_weight_bytes": self.target_weight_bytes,
            "drafter_weight_bytes": self.drafter_weight_bytes,
            "draft_length": self.draft_length,
            "overall": asdict(overall),
            "per_set": {result.name: asdict(result) for result in self.per_set},
            "provenance": dict(self.provenance),
            "settings": asdict(self.settings),
        }


@dataclass
class _Trials:
    """Decodes of one prompt set: [repeat][prompt]."""

    baseline: list[list[DecodeResult]] = field(default_factory=list)
    speculative: list[list[DecodeResult]] = field(default_factory=list)


def run_pair(
    target_dir: Path,
    drafter_dir: Path | None,
    prompt_sets: Sequence[PromptSet],
    settings: RunSettings,
    progress: Progress | None = None,
) -> PairRun:
    """Measure the drafter at `drafter_dir` (None: baseline only) on the target at `target_dir`."""
    if not prompt_sets or any(not s.prompts for s in prompt_sets):
        raise ValueError("run_pair needs at least one non-empty prompt set")
    target = load_target(Path(target_dir), device=settings.device, dtype=settings.dtype)
    method, proposer = (None, None) if drafter_dir is None else _load_drafter(Path(drafter_dir), target, settings)
    device = target.device
    eos_ids = _eos_token_ids(target)
    encoded = [
        [torch.tensor(encode_prompt(p, target.tokenizer, enable_thinking=settings.enable_thinking), device=device)
         for p in prompt_set.prompts]
        for prompt_set in prompt_sets
    ]  # fmt: skip

    def run(candidate: Proposer, prompt: torch.Tensor, seed: int) -> DecodeResult:
        generator = torch.Generator(device=device).manual_seed(seed)
        return decode(
            target.model,
            candidate,
            prompt,
            max_new_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            generator=generator,
            eos_token_ids=eos_ids,
        )

    for _ in range(settings.warmup):
        for candidate in (NoDraft(), proposer):
            if candidate is not None:
                run(candidate, encoded[0][0], settings.seed)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    trials = [_Trials() for _ in prompt_sets]
    divergence: Divergence | None = None
    total = settings.repeats * sum(len(s.prompts) for s in prompt_sets)
    done = 0
    for repeat in range(settings.repeats):
        for set_index, prompt_set in enumerate(prompt_sets):
            baseline_row: list[DecodeResult] = []
            speculative_row: list[DecodeResult] = []
            for prompt_index, prompt in enumerate(encoded[set_index]):
                seed = _decode_seed(settings.seed, repeat, set_index, prompt_index)
                baseline_row.append(run(NoDraft(), prompt, seed))
                if proposer is not None:
                    speculative_row.append(run(proposer, prompt, seed))
                    if settings.temperature == 0 and divergence is None:
                        divergence = first_divergence(
                            baseline_row[-1].tokens, speculative_row[-1].tokens, prompt_set.name, prompt_index, repeat
                        )
                done += 1
                if progress is not None:
                    progress(done, total, f"{prompt_set.name} #{prompt_index} (repeat {repeat + 1})")
            trials[set_index].baseline.append(baseline_row)
            if proposer is not None:
                trials[set_index].speculative.append(speculative_row)

    greedy_with_drafter = proposer is not None and settings.temperature == 0
    per_set = [
        _summarize(s.name, s.digest, t, _set_lossless(t) if greedy_with_drafter else None)
        for s, t in zip(prompt_sets, trials, strict=True)
    ]
    combined = _Trials(
        baseline=[[d for t in trials for d in t.baseline[r]] for r in range(settings.repeats)],
        speculative=[[d for t in trials for d in t.speculative[r]] for r in range(settings.repeats)]
        if proposer is not None
        else [],
    )
    sets_digest = _combined_digest([s.digest for s in prompt_sets])
    lossless = (divergence is None) if greedy_with_drafter else None
    overall = _summarize("overall", sets_digest, combined, lossless)
    peak_bytes, peak_kind = _peak_memory(device)
    draft_length = proposer.draft_length if proposer is not None else 0
    return PairRun(
        method=method,
        overall=overall,
        per_set=per_set,
        lossless=lossless,
        first_divergence=divergence,
        peak_memory_bytes=peak_bytes,
        peak_memory_kind=peak_kind,
        target_weight_bytes=weight_bytes(target.path),
        drafter_weight_bytes=weight_bytes(Path(drafter_dir)) if drafter_dir is not None else None,
        provenance=_provenance(target, drafter_dir, method, proposer, prompt_sets, sets_digest, settings),
        settings=settings,
        draft_length=draft_length,
        generations={
            f"{s.name}/{i}": list(decoded.tokens)
            for s, t in zip(prompt_sets, trials, strict=True)
            for i, decoded in enumerate((t.speculative or t.baseline)[-1])
        },
    )


def _load_drafter(drafter_dir: Path, target: LoadedTarget, settings: RunSettings) -> tuple[str, Proposer]:
    from registry.compat import check_pair
    from registry.configs import detect_method
    from verifier.methods import proposer_builder

    drafter_config = read_config(drafter_dir)
    method = settings.method or detect_method(drafter_config) or "draft-lm"
    build = proposer_builder(method)
    verdict = check_pair(
        drafter_config,
        target.config,
        drafter_method=method,
        target_repo_id=None,
        declared_targets=(),
        drafter_tokenizer_digest=_tokenizer_digest(drafter_dir),
        target_tokenizer_digest=_tokenizer_digest(target.path),
    )
    if verdict.verdict == "incompatible":
        raise IncompatiblePair(verdict.reasons)
    return method, build(drafter_dir, target, settings)


def _tokenizer_digest(folder: Path) -> str | None:
    from registry.configs import tokenizer_digest

    files = {name: (folder / name).read_bytes() for name in TOKENIZER_FILE_NAMES if (folder / name).is_file()}
    return tokenizer_digest(files) if files else None


def _eos_token_ids(target: LoadedTarget) -> frozenset[int]:
    ids: set[int] = set()
    generation_eos = getattr(getattr(target.model, "generation_config", None), "eos_token_id", None)
    for value in (target.tokenizer.eos_token_id, generation_eos):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return frozenset(ids)


def _decode_seed(seed: int, repeat: int, set_index: int, prompt_index: int) -> int:
    material = f"{seed}/{repeat}/{set_index}/{prompt_index}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big") >> 1


def first_divergence(
    baseline: Sequence[int], speculative: Sequence[int], set_name: str, prompt_index: int, repeat: int
) -> Divergence | None:
    if list(baseline) == list(speculative):
        return None
    position = next(
        (i for i, (b, s) in enumerate(zip(baseline, speculative, strict=False)) if b != s),
        min(len(baseline), len(speculative)),
    )
    return Divergence(
        prompt_set=set_name,
        prompt_index=prompt_index,
        repeat=repeat,
        position=position,
        baseline_token=baseline[position] if position < len(baseline) else None,
        speculative_token=speculative[position] if position < len(speculative) else None,
    )


def _set_lossless(trials: _Trials) -> bool:
    return all(
        list(b.tokens) == list(s.tokens)
        for base_row, spec_row in zip(trials.baseline, trials.speculative, strict=True)
        for b, s in zip(base_row, spec_row, strict=True)
    )


def _summarize(name: str, digest: str, trials: _Trials, lossless: bool | None) -> SetResult:
    baseline_runs = [throughput(row) for row in trials.baseline]
    baseline = throughput([d for row in trials.baseline for d in row])
    result = SetResult(
        name=name,
        prompts=len(trials.baseline[0]),
        digest=digest,
        baseline=baseline,
        baseline_tokens_per_s=spread([r.tokens_per_s for r in baseline_runs]),
    )
    if not trials.speculative:
        return result
    speculative_runs = [throughput(row) for row in trials.speculative]
    speculative = throughput([d for row in trials.speculative for d in row])
    speedups = spread(
        [speedup(s.tokens_per_s, b.tokens_per_s) for s, b in zip(speculative_runs, baseline_runs, strict=True)]
    )
    rounds = [r for row in trials.speculative for d in row for r in d.rounds]
    measured = acceptance(rounds) if rounds else None
    ideal = None
    if measured is not None and speculative.draft_seconds_per_step + speculative.verify_seconds_per_step > 0:
        # The realized speedup counts emitted tokens, so the ideal must too: τ also counts drafts accepted past
        # EOS or max_new_tokens in a final round, which are never output.
        emitted_per_step = sum(r.emitted for r in rounds) / len(rounds)
        ideal = ideal_speedup(
            emitted_per_step,
            baseline.draft_seconds_per_step + baseline.verify_seconds_per_step,
            speculative.draft_seconds_per_step,
            speculative.verify_seconds_per_step,
        )
    return SetResult(
        name=name,
        prompts=result.prompts,
        digest=digest,
        baseline=baseline,
        baseline_tokens_per_s=result.baseline_tokens_per_s,
        speculative=speculative,
        tokens_per_s=spread([r.tokens_per_s for r in speculative_runs]),
        speedup=speedups,
        acceptance=measured,
        ideal_speedup=ideal,
        efficiency=speedups.median / ideal if ideal else None,
        lossless=lossless,
    )


def _combined_digest(digests: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


def _peak_memory(device: torch.device) -> tuple[int, str]:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device)), "cuda_max_memory_allocated"
    # Linux reports ru_maxrss in KiB; it is the peak of the whole process so far, not of this run alone.
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_rss_peak"


def snapshot_sha(folder: Path) -> str | None:
    """The commit sha when `folder` is a Hugging Face cache snapshot (…/snapshots/<sha>)."""
    name = folder.resolve().name
    is_sha = len(name) == 40 and all(c in "0123456789abcdef" for c in name)
    return name if is_sha and folder.resolve().parent.name == "snapshots" else None


def _provenance(
    target: LoadedTarget,
    drafter_dir: Path | None,
    method: str | None,
    proposer: Proposer | None,
    prompt_sets: Sequence[PromptSet],
    sets_digest: str,
    settings: RunSettings,
) -> dict[str, Any]:
    import transformers

    device = target.device
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"
    drafter_path = Path(drafter_dir) if drafter_dir is not None else None
    return {
        "target_sha": snapshot_sha(target.path),
        "target_files_digest": target.files_digest,
        "drafter_sha": snapshot_sha(drafter_path) if drafter_path else None,
        "drafter_files_digest": files_digest(drafter_path) if drafter_path else None,
        "prompt_sets": {s.name: s.digest for s in prompt_sets},
        "prompt_sets_digest": sets_digest,
        "method": method,
        "draft_length": proposer.draft_length if proposer is not None else 0,
        "block_size": getattr(proposer, "block_size", None),
        "temperature": settings.temperature,
        "seed": settings.seed,
        "max_new_tokens": settings.max_new_tokens,
        "dtype": settings.dtype,
        "device": device_name,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
    }
